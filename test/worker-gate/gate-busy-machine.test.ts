import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CallbackReceiver,
  FAKE_GPU_BIN,
  gateClient,
  startGateProcess,
  waitUntil,
  writeGateConfig,
  type GateFixture,
  type GateProcess,
} from '../support/gate.ts';

// expected duration: ~50 s

// The smallest sustain allowed, and the inference_eval thresholds a finished run once waited on for hours.
const IDLE_SUSTAIN_SEC = 30;
const STRICT_THRESHOLDS = { idle_sustain_sec: IDLE_SUSTAIN_SEC, cpu_idle_threshold_pct: 20, gpu_idle_avg_threshold_pct: 10, gpu_idle_peak_threshold_pct: 20, vram_delta_threshold_mib: 512 };
/** "A few seconds" past the window: one sample interval, the callback's delivery and a loaded CI machine. */
const FINISH_MARGIN_MS = 10_000;

interface Gate {
  fixture: GateFixture;
  process: GateProcess;
  client: ReturnType<typeof gateClient>;
}

let receiver: CallbackReceiver;
let gpuDir: string;
const gates: Gate[] = [];
const hogs: ChildProcess[] = [];

async function startGate(scope: 'run' | 'machine'): Promise<Gate> {
  const fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { ...STRICT_THRESHOLDS, quiet_window_scope: scope } });
  // The stand-in nvidia-smi reports another user's compute process keeping the only GPU fully busy.
  const process_ = await startGateProcess(fixture, { PATH: `${FAKE_GPU_BIN}:${process.env.PATH ?? ''}`, FAKE_NVIDIA_SMI_DIR: gpuDir });
  const gate = { fixture, process: process_, client: gateClient(fixture) };
  gates.push(gate);
  return gate;
}

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  gpuDir = await mkdtemp(join(tmpdir(), 'rcp-fake-gpu-'));
  await writeFile(join(gpuDir, 'gpus.csv'), '0, 100, 70000, 81559, GPU-busy-0\n');
  await writeFile(join(gpuDir, 'compute-apps.csv'), '1, 70000, GPU-busy-0\n');
  // Two processes keep both cores of the machine busy for the whole test; they are no run's.
  for (let i = 0; i < 2; i++) hogs.push(spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore', cwd: tmpdir() }));
}, 60_000);

afterAll(async () => {
  for (const hog of hogs) hog.kill('SIGKILL');
  for (const gate of gates) {
    await gate.process.kill('SIGTERM');
    await rm(gate.fixture.dir, { recursive: true, force: true });
  }
  await receiver?.down();
  if (gpuDir) await rm(gpuDir, { recursive: true, force: true });
});

describe.concurrent('a finished run while other work keeps the machine busy', () => {
  it(`completes within idle_sustain_sec plus a few seconds when the window is judged on the run`, { timeout: 150_000 }, async () => {
    const { client } = await startGate('run');
    const runId = 'busy-run';
    const launched = await client.launch(runId, 'normal');
    expect(launched.status, JSON.stringify(launched.body)).toBe(200);

    const finished = await receiver.waitFor(runId, 'session_finished_ready', IDLE_SUSTAIN_SEC * 1000 + 60_000);
    // The first scan that found none of the run's processes alive: within one sample interval of the last exit.
    const view = await client.runView(runId);
    const exited = view?.processes_exited_at as string;
    const exitToFinishMs = finished.at - Date.parse(exited);
    const accounting = view?.cgroup ? `its cgroup (${view.cgroup.kind})` : 'its tracked processes';
    console.log(`busy machine, scope 'run': agent's last exit to session_finished_ready ${(exitToFinishMs / 1000).toFixed(1)} s (idle_sustain_sec ${IDLE_SUSTAIN_SEC}; the run's CPU from ${accounting})`);
    expect(exitToFinishMs).toBeLessThanOrEqual(IDLE_SUSTAIN_SEC * 1000 + FINISH_MARGIN_MS);
    // The window judged the run alone: its CPU near nothing, no GPU of its own, although the machine was saturated.
    const window = finished.body.telemetry.quiet_window!;
    expect(window).toMatchObject({ samples_in_window: IDLE_SUSTAIN_SEC, gpu_present: true, peak_gpu_pct: 0, vram_delta_mib: 0 });
    expect(window.mean_cpu_pct).toBeLessThanOrEqual(STRICT_THRESHOLDS.cpu_idle_threshold_pct);
    expect(finished.body.telemetry.cpu_pct).toBeGreaterThan(50);
  });

  it("keeps waiting with the machine's CPU and GPU as the reason when the window is judged on the machine", { timeout: 150_000 }, async () => {
    const { client } = await startGate('machine');
    const runId = 'machine-run';
    const launched = await client.launch(runId, 'normal');
    expect(launched.status, JSON.stringify(launched.body)).toBe(200);
    const waiting = await waitUntil(
      'a full window that is not quiet',
      async () => {
        const view = await client.runView(runId);
        const window = view?.quiet_window as { samples_in_window: number; samples_needed: number; reasons: string[] } | undefined;
        return window && window.samples_in_window === window.samples_needed ? view : undefined;
      },
      IDLE_SUSTAIN_SEC * 1000 + 60_000,
    );
    expect(waiting.gate_state).toBe('finished_pending_gate');
    expect(waiting.quiet_window.verdict).toBe('waiting_for_quiet_window');
    // How long it has waited, for every view of the run (not yet far longer than the window: nobody is called).
    expect(waiting.quiet_window).toMatchObject({ scope: 'machine', idle_sustain_sec: IDLE_SUSTAIN_SEC, overdue: false });
    expect(waiting.quiet_window.waiting_sec).toBeGreaterThanOrEqual(IDLE_SUSTAIN_SEC - 2);
    expect(waiting.quiet_window.reasons).toEqual(expect.arrayContaining([expect.stringMatching(/^mean CPU \d+(\.\d)?% above threshold 20%$/), 'peak GPU 100% above threshold 20%']));
    expect(receiver.forRun(runId).map((callback) => callback.body.event_type)).toEqual(['session_started']);
  });
});
