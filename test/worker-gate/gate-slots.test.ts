import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackReceiver, FAKE_GPU_BIN, GATE_TOKEN, gateClient, startGateProcess, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';
import { scrape, sampleValue } from '../support/prometheus.ts';

// expected duration: ~45 s

/**
 * Several runs on one worker gate (docs/worker-gate.md#slots-and-gpus), through its HTTP interface: real gates, the
 * fake agent as their dispatch script, and the stand-in nvidia-smi reporting four GPUs.
 */

const GPU_COUNT = 4;
const uuidOf = (index: number) => `GPU-5107${index}000-0000-4000-8000-00000000000${index}`;
/** A quiet GPU as nvidia-smi prints it: index, utilisation, memory used, memory total, uuid. */
const gpuRow = (index: number, utilisation: number, usedMib: number) => `${index}, ${utilisation}, ${usedMib}, 81559, ${uuidOf(index)}`;

interface Gate {
  fixture: GateFixture;
  process: GateProcess;
  client: ReturnType<typeof gateClient>;
  /** Runs dispatched on it, cancelled at the end so no agent outlives the test. */
  runs: string[];
}

let receiver: CallbackReceiver;
let gpuDir: string;
const gates: Gate[] = [];

async function writeGpus(rows: string[], computeApps: string[] = []): Promise<void> {
  await writeFile(join(gpuDir, 'gpus.csv'), `${rows.join('\n')}\n`);
  await writeFile(join(gpuDir, 'compute-apps.csv'), computeApps.length > 0 ? `${computeApps.join('\n')}\n` : '');
}

async function startGate(overrides: Record<string, unknown>): Promise<Gate> {
  const fixture = await writeGateConfig({
    callbackUrl: receiver.url,
    overrides: {
      // The allow-list would pass the gate's own GPU settings on: a run given GPUs must see its own instead.
      agent_credential_env: ['FAKE_AGENT_COUNTER_FILE', 'CUDA_VISIBLE_DEVICES', 'NVIDIA_VISIBLE_DEVICES'],
      ...overrides,
    },
  });
  const process_ = await startGateProcess(fixture, {
    PATH: `${FAKE_GPU_BIN}:${process.env.PATH ?? ''}`,
    FAKE_NVIDIA_SMI_DIR: gpuDir,
    CUDA_VISIBLE_DEVICES: '0,1,2,3',
    NVIDIA_VISIBLE_DEVICES: 'all',
  });
  const gate = { fixture, process: process_, client: gateClient(fixture), runs: [] as string[] };
  gates.push(gate);
  return gate;
}

/**
 * Prepares and dispatches a run of the fake agent (test/fixtures/agents/fake-agent.ts): `hold` works until it is
 * stopped, `slow` works for work_sec, then ends. The run is cancelled at the end of the file.
 */
async function launch(gate: Gate, runId: string, scenario: 'hold' | { scenario: 'slow'; work_sec: number }, extra: Record<string, unknown> = {}) {
  gate.runs.push(runId);
  const body = gate.client.dispatchBody(runId, extra);
  const prepared = await gate.client.prepare({ run_id: runId, project_id: body.project_id, project_dir: body.project_dir, prompt_file: body.prompt_file, prompt_text: '# slots\n' });
  if (prepared.status !== 200) throw new Error(`prepare failed: ${JSON.stringify(prepared)}`);
  await writeFile(join(gate.fixture.projectRoot, String(body.project_dir), 'scenario.json'), JSON.stringify(typeof scenario === 'string' ? { scenario } : scenario));
  return gate.client.dispatch(body);
}

/** GPU 0 idle, the others at 95 % with 30000 MiB in use: the work of the runs given them. */
const BUSY_BUT_GPU0 = Array.from({ length: GPU_COUNT }, (_, index) => (index === 0 ? gpuRow(0, 0, 500) : gpuRow(index, 95, 30_000)));

/** The environment a process started with, as /proc shows it. */
function environmentOf(pid: number): Map<string, string> {
  return new Map(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter((entry) => entry.includes('='))
      .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)] as [string, string]),
  );
}

const capacityOf = async (gate: Gate) => (await gate.client.dashboard()).body.capacity as Record<string, any>;

const writable = (path: string) => {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
};

/** Whether this machine lets the gate's run cgroups be pinned to CPUs, judged apart from the gate: v1's cpuset hierarchy writable, or v2's controller offered. */
function cpusetExpected(runCgroups: { mode: string; parents: string[] }): boolean {
  if (runCgroups.mode === 'v1') return writable('/sys/fs/cgroup/cpuset/cgroup.procs');
  if (runCgroups.mode === 'v2') return readFileSync(join(runCgroups.parents[0]!, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('cpuset');
  return false;
}

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  gpuDir = await mkdtemp(join(tmpdir(), 'rcp-fake-gpus-'));
  await writeGpus(Array.from({ length: GPU_COUNT }, (_, index) => gpuRow(index, 0, 500)));
}, 30_000);

afterAll(async () => {
  for (const gate of gates) {
    for (const runId of gate.runs) await gate.client.call('POST', `/runs/${runId}/cancel`).catch(() => undefined);
    await gate.process.kill('SIGTERM');
    await rm(gate.fixture.dir, { recursive: true, force: true });
  }
  await receiver?.down();
  if (gpuDir) await rm(gpuDir, { recursive: true, force: true });
}, 60_000);

describe('a gate with four slots and four GPUs', () => {
  let gate: Gate;
  const runIds = Array.from({ length: GPU_COUNT }, (_, index) => `gpu${index}-run`);
  const dispatched = new Map<string, Record<string, any>>();

  beforeAll(async () => {
    // Judged on the machine, where another run's busy GPU held every finished run before runs had GPUs of their own.
    gate = await startGate({
      run_slots: 4,
      quiet_window_scope: 'machine',
      idle_sustain_sec: 30,
      cpu_idle_threshold_pct: 100,
      gpu_idle_avg_threshold_pct: 10,
      gpu_idle_peak_threshold_pct: 20,
      vram_delta_threshold_mib: 1024,
    });
  }, 90_000);

  it('runs four agents at once, each pinned to its GPU, each seeing only that GPU', { timeout: 60_000 }, async () => {
    // Run 0 works a few seconds and ends; the others keep their GPUs busy until they are stopped, from before run 0
    // ends to after its window. The first two runs are pinned to one CPU each.
    await writeGpus(BUSY_BUT_GPU0);
    const answers = await Promise.all(
      runIds.map((runId, index) =>
        launch(gate, runId, index === 0 ? { scenario: 'slow', work_sec: 6 } : 'hold', { gpu_indices: [index], ...(index < 2 ? { cpu_count: 1 } : {}) }),
      ),
    );
    for (const [index, answer] of answers.entries()) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body.gpu_indices).toEqual([index]);
      dispatched.set(runIds[index]!, answer.body);
    }
    for (const [index, runId] of runIds.entries()) {
      const environment = environmentOf(dispatched.get(runId)!.root_pid as number);
      expect([environment.get('RUN_ID'), environment.get('CUDA_VISIBLE_DEVICES'), environment.get('NVIDIA_VISIBLE_DEVICES')]).toEqual([runId, String(index), String(index)]);
    }
  });

  it('pins the first two runs to the lowest CPUs where its cgroups have a cpuset, and says why not where they have none', async () => {
    const { body } = await gate.client.dashboard();
    const pinning = body.capacity.cpu_pinning as { available: boolean; cpus: number[]; reason: string | null };
    expect(pinning.available).toBe(cpusetExpected(body.service.run_cgroups));
    // The two were dispatched at once, so which of them was placed first (and took the lowest CPU) is not fixed.
    const pinned: number[] = [];
    for (const runId of runIds.slice(0, 2)) {
      const view = (body.runs as Record<string, any>[]).find((run) => run.run_id === runId)!;
      if (pinning.available) {
        expect(pinning.cpus.length, 'two runs need two CPUs').toBeGreaterThanOrEqual(2);
        expect(view.cpus, JSON.stringify(view)).toHaveLength(1);
        const cpu = view.cpus[0] as number;
        pinned.push(cpu);
        expect([view.cpus_unpinned_reason, dispatched.get(runId)!.cpus]).toEqual([null, [cpu]]);
        const cpuset = (view.cgroup.paths as string[]).find((path) => existsSync(join(path, 'cpuset.cpus')));
        expect(cpuset, JSON.stringify(view.cgroup)).toBeDefined();
        expect(readFileSync(join(cpuset!, 'cpuset.cpus'), 'utf8').trim()).toBe(String(cpu));
      } else {
        expect(pinning.reason).toEqual(expect.any(String));
        expect([view.cpus, view.cpus_unpinned_reason]).toEqual([null, `cpu_count 1 not applied: ${pinning.reason}`]);
      }
    }
    if (pinning.available) expect(pinned.sort((a, b) => a - b)).toEqual([...pinning.cpus].sort((a, b) => a - b).slice(0, 2));
    for (const runId of runIds.slice(2)) expect((body.runs as Record<string, any>[]).find((run) => run.run_id === runId)).toMatchObject({ cpus: null, cpus_unpinned_reason: null });
  });

  it('refuses a fifth run while all four slots are held, naming the runs that hold them', async () => {
    const refused = await launch(gate, 'fifth-run', 'hold', { gpu_indices: [] });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(/^all 4 slots hold runs: /);
    for (const runId of runIds) expect(refused.body.detail).toContain(runId);
    const metrics = await scrape(gate.fixture.url, GATE_TOKEN);
    expect([sampleValue(metrics, 'rcp_gate_run_slots'), sampleValue(metrics, 'rcp_gate_run_slots_held')]).toEqual([4, 4]);
  });

  it('reports who holds which GPU and slot', async () => {
    const capacity = await capacityOf(gate);
    expect(capacity).toMatchObject({ slots: 4, slots_held: 4 });
    expect(capacity.gpus).toEqual(
      runIds.map((runId, index) =>
        expect.objectContaining({ index, uuid: uuidOf(index), offered: true, run_id: runId, memory_total_mib: 81559, memory_used_mib: expect.any(Number), memory_free_mib: expect.any(Number) }),
      ),
    );
    expect(new Set((capacity.runs as { run_id: string }[]).map((run) => run.run_id))).toEqual(new Set(runIds));
    for (const run of capacity.runs as { run_id: string; gpu_indices: number[] }[]) expect(run.gpu_indices).toEqual([runIds.indexOf(run.run_id)]);
  });

  it("finishes run 0 on its idle GPU's quiet window while the three others keep their GPUs busy, then frees its slot and GPU", { timeout: 120_000 }, async () => {
    // The three working runs' own processes hold memory on their GPUs at 95 %; GPU 0 is idle.
    await writeGpus(BUSY_BUT_GPU0, runIds.slice(1).map((runId, i) => `${dispatched.get(runId)!.root_pid}, 29000, ${uuidOf(i + 1)}`));
    await receiver.waitFor('gpu0-run', 'session_finished_ready', 100_000);
    const { body } = await gate.client.dashboard();
    const views = new Map((body.runs as Record<string, any>[]).map((run) => [run.run_id, run]));
    expect(views.get('gpu0-run')).toMatchObject({ gate_state: 'finished_ready', gpu_indices: [0] });
    expect(views.get('gpu0-run')!.quiet_window).toMatchObject({ verdict: 'ready', peak_gpu_pct: 0, vram_delta_mib: 0 });
    for (const runId of runIds.slice(1)) expect(views.get(runId)).toMatchObject({ gate_state: 'running', processes_alive: true });
    expect(body.capacity).toMatchObject({ slots: 4, slots_held: 3 });
    expect(body.capacity.gpus.map((gpu: { run_id: string | null }) => gpu.run_id)).toEqual([null, ...runIds.slice(1)]);
    expect(body.capacity.gpus[1]).toMatchObject({ utilization_pct: 95, memory_used_mib: 30_000, memory_free_mib: 81559 - 30_000 });
  });

  it('with a slot free, refuses a GPU another run holds and one it does not offer, and gives the free GPU to one of two dispatches at once', { timeout: 60_000 }, async () => {
    const held = await launch(gate, 'held-run', 'hold', { gpu_indices: [0, 2] });
    expect(held.status).toBe(409);
    expect(held.body.detail).toBe("GPU 2 is held by run 'gpu2-run'");
    const unknown = await launch(gate, 'unknown-run', 'hold', { gpu_indices: [7] });
    expect(unknown.status).toBe(409);
    expect(unknown.body.detail).toBe('GPU 7 is not offered by this gate (nvidia-smi reports GPUs 0, 1, 2, 3)');
    const { body } = await gate.client.dashboard();
    const pinning = body.capacity.cpu_pinning as { available: boolean; cpus: number[]; free: number[] };
    if (pinning.available) {
      // Run 1 keeps its CPU: asking for all of them leaves one short.
      expect(pinning.free).not.toContain(dispatched.get('gpu1-run')!.cpus[0]);
      const tooMany = await launch(gate, 'cpus-run', 'hold', { gpu_indices: [0], cpu_count: pinning.cpus.length });
      expect(tooMany.status).toBe(409);
      expect(tooMany.body.detail).toMatch(new RegExp(`^cpu_count ${pinning.cpus.length}: only ${pinning.cpus.length - 1} of this gate's ${pinning.cpus.length} CPUs are free .*gpu1-run`));
    }
    // Two dispatches at the same moment for the last slot and GPU 0: one gets them, the other is refused.
    const [first, second] = await Promise.all([launch(gate, 'again0-run', 'hold', { gpu_indices: [0] }), launch(gate, 'twin0-run', 'hold', { gpu_indices: [0] })]);
    expect([first.status, second.status].sort(), JSON.stringify([first.body, second.body])).toEqual([200, 409]);
    const winner = first.status === 200 ? 'again0-run' : 'twin0-run';
    expect((first.status === 409 ? first : second).body.detail).toMatch(new RegExp(`^(all 4 slots hold runs: .*${winner}|GPU 0 is held by run '${winner}')`));
    expect((await capacityOf(gate)).gpus[0].run_id).toBe(winner);
  });
});

describe('a gate with one slot, two of its GPUs offered and no cgroups', () => {
  let gate: Gate;

  beforeAll(async () => {
    gate = await startGate({ run_gpus: [0, 1], run_cgroup_mode: 'none' });
  }, 90_000);

  it('refuses a GPU run_gpus does not offer, and shows every GPU with whether it is offered', async () => {
    await writeGpus(Array.from({ length: GPU_COUNT }, (_, index) => gpuRow(index, 0, 500)));
    const refused = await launch(gate, 'offered-run', 'hold', { gpu_indices: [1, 2] });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toBe('GPU 2 is not offered by this gate (run_gpus lists 0, 1)');
    const capacity = await capacityOf(gate);
    expect(capacity).toMatchObject({ slots: 1, slots_held: 0, runs: [] });
    expect(capacity.gpus.map((gpu: { offered: boolean }) => gpu.offered)).toEqual([true, true, false, false]);
    expect(capacity.cpu_pinning).toMatchObject({ available: false, cpus: [], free: [], reason: expect.stringMatching(/^runs get no cgroup here/) });
  });

  it('refuses malformed GPU and CPU requests with 422', async () => {
    for (const extra of [{ gpu_indices: [1, 1] }, { gpu_indices: [256] }, { gpu_indices: Array.from({ length: 65 }, (_, i) => i) }, { gpu_indices: 'all' }, { cpu_count: 0 }, { cpu_count: 1.5 }]) {
      const answer = await gate.client.dispatch(gate.client.dispatchBody('malformed-run', extra));
      expect(answer.status, JSON.stringify(extra)).toBe(422);
    }
  });

  it('gives a run no GPU for [] and leaves it unpinned to CPUs, saying why', async () => {
    const answer = await launch(gate, 'nogpu-run', 'hold', { gpu_indices: [], cpu_count: 1 });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body).toMatchObject({ gpu_indices: [], cpus: null, cpus_unpinned_reason: expect.stringMatching(/^cpu_count 1 not applied: runs get no cgroup here/) });
    const environment = environmentOf(answer.body.root_pid as number);
    expect([environment.get('CUDA_VISIBLE_DEVICES'), environment.get('NVIDIA_VISIBLE_DEVICES')]).toEqual(['', 'void']);
    expect(await gate.client.runView('nogpu-run')).toMatchObject({ gpu_indices: [], cpus: null, cpus_unpinned_reason: answer.body.cpus_unpinned_reason });
  });

  it('refuses a second run on another project while its one slot is held, and takes it once the first is cancelled', async () => {
    const refused = await launch(gate, 'second-run', 'hold');
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toBe('all 1 slots hold runs: nogpu-run');
    expect((await gate.client.call('POST', '/runs/nogpu-run/cancel')).status).toBe(200);
    const taken = await gate.client.dispatch(gate.client.dispatchBody('second-run'));
    expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    // Not pinned: it keeps whatever the gate's environment says of the GPUs.
    expect(taken.body.gpu_indices).toBeNull();
    expect(environmentOf(taken.body.root_pid as number).get('CUDA_VISIBLE_DEVICES')).toBe('0,1,2,3');
  });
});
