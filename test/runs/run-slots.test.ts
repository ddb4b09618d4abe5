import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTIVE_QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';
import { pinnedAgentBinary } from '../../worker-gate/launchers/installed-agents.ts';
import { ResponsesServer } from '../../scripts/scripted-model-servers.ts';
import { AGENT_DISPATCH_TIMEOUT_SEC, EVIDENCE } from '../support/agent-gates.ts';
import { CONTROL_TOKEN, FAKE_GPU_BIN, gateClient, waitUntil } from '../support/gate.ts';
import { testPort } from '../support/ports.ts';
import { gateTarget, ledgerReads, RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';

/**
 * Several runs on one worker (docs/runs.md#slots-and-gpus), through the whole product: one gate of five slots on a
 * machine whose stand-in nvidia-smi reports four GPUs, a control plane whose target declares the same. Runs of the
 * simulated agent each get a GPU of their own, finish on their own quiet windows while the others keep working, and
 * a run needing two GPUs waits for two; then four real Codex runs against the scripted model run at once, each seeing
 * only its own GPU.
 */

// expected duration: ~150 s

const GPU_MEMORY_MIB = 24_576;
const WAIT_MS = 120_000;

let stack: RunStack;
let responses: ResponsesServer;
let gpuDir: string;
const { queueItem, runRow } = ledgerReads(() => stack.store);

beforeAll(async () => {
  if (!existsSync(pinnedAgentBinary('codex'))) throw new Error(`codex is not installed at ${pinnedAgentBinary('codex')}: run bash scripts/ensure-agents.sh (npm test's pretest does)`);
  gpuDir = await mkdtemp(join(tmpdir(), 'rcp-slots-gpus-'));
  // Four idle GPUs, as the real tool prints them for the gate's query: index, utilisation, memory used and total, uuid.
  await writeFile(join(gpuDir, 'gpus.csv'), [0, 1, 2, 3].map((index) => `${index}, 0, 1024, ${GPU_MEMORY_MIB}, GPU-0000000${index}-0000-4000-8000-000000000000`).join('\n') + '\n');
  responses = await ResponsesServer.start(await testPort());
  stack = await startRunStack({
    defaultLane: false,
    gateOverrides: {
      run_slots: 5,
      // The simulated agent serves every class but training, which a real Codex serves.
      agent_runtime_by_workload_class: { training: 'codex' },
      // The built-in training profile waits 180 s of quiet; these agents stop at once.
      workload_profiles: { training: { idle_sustain_sec: 30, cpu_idle_threshold_pct: 100, gpu_idle_avg_threshold_pct: 100, gpu_idle_peak_threshold_pct: 100, vram_delta_threshold_mib: 1_000_000 } },
      dispatch_timeout_sec: AGENT_DISPATCH_TIMEOUT_SEC,
    },
    gateEnv: { PATH: `${FAKE_GPU_BIN}:${process.env.PATH ?? ''}`, FAKE_NVIDIA_SMI_DIR: gpuDir, OPENAI_BASE_URL: responses.baseUrl, OPENAI_API_KEY: 'sk-scripted-0123456789' },
    controlPlaneOverrides: (gate) => ({ dispatch_timeout_sec: AGENT_DISPATCH_TIMEOUT_SEC, worker_targets: { 'gpu-box': { ...gateTarget(gate), slots: 5 } } }),
  });
}, RUN_STACK_START_MS);

afterAll(async () => {
  await stack?.close();
  await responses?.down();
  if (gpuDir) await rm(gpuDir, { recursive: true, force: true });
});

const ACTIVE: readonly string[] = ACTIVE_QUEUE_STATUSES;
const RCP = fileURLToPath(new URL('../../bin/rcp.js', import.meta.url));

/** `rcp lanes` as an operator runs it, against the stack's control plane. */
async function rcpLanes(): Promise<string[]> {
  const { stdout } = await promisify(execFile)(process.execPath, [RCP, 'lanes'], { env: { ...process.env, RCP_URL: stack.cpFixture.url, RCP_TOKEN: CONTROL_TOKEN } });
  return stdout.trim().split('\n').map((line) => line.split(/\s{2,}/).join(' | '));
}

async function seed(key: string, needs: { gpu_count?: number; gpu_memory_mib?: number }, scenario: Record<string, unknown>, workloadClass: 'unknown' | 'training' = 'unknown') {
  await stack.seed(key, { projectName: `Slots [${key}]`, lane: 'gpu-box', scenario, item: { workload_class: workloadClass, ...needs } });
}

const dryRun = async () => (await stack.api('POST', '/control/dispatch-next', { dry_run: true, requested_by: 'slots-test' })).body;

async function dispatchLive(projectId: string): Promise<{ run_id: string; lane: string }> {
  const live = await stack.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'slots-test' });
  expect(live.status, JSON.stringify(live.body)).toBe(200);
  expect(live.body, JSON.stringify(live.body)).toMatchObject({ action: 'live_dispatch', candidate: { project_id: projectId } });
  stack.agents.remember(live.body);
  return { run_id: live.body.run_id, lane: live.body.dispatch_route.lane };
}

const completed = (projectId: string) => async () => ((await queueItem(projectId)).status === 'completed' ? true : undefined);

describe('slots and GPUs on one gate', () => {
  it('runs four simulated agents at once, each on its own GPU, finishes two on their own windows while two keep working, and holds a two-GPU run until two are free', { timeout: 240_000 }, async () => {
    for (const key of ['slot-a', 'slot-b']) await seed(key, { gpu_count: 1, gpu_memory_mib: 8_000 }, { scenario: 'slow', work_sec: 1 });
    for (const key of ['slot-c', 'slot-d']) await seed(key, { gpu_count: 1, gpu_memory_mib: 8_000 }, { scenario: 'slow', work_sec: 20 });

    const dry = await dryRun();
    expect(dry).toMatchObject({
      action: 'dry_run_dispatch',
      candidate: { project_id: 'slot-a', gpu_count: 1, gpu_memory_mib: 8_000 },
      dispatch_route: { machine_target: 'gpu-box', lane: 'gpu-box', slot: 1 },
      placement: { needs: { gpu_count: 1, gpu_memory_mib: 8_000, cpu_count: null }, gpu_indices: [0], reason: 'on gpu-box (slot 1 of 5), GPU 0' },
    });

    const runs: Record<string, { run_id: string; lane: string }> = {};
    for (const key of ['slot-a', 'slot-b', 'slot-c', 'slot-d']) runs[key] = await dispatchLive(key);
    expect(Object.values(runs).map((run) => run.lane)).toEqual(['gpu-box', 'gpu-box/2', 'gpu-box/3', 'gpu-box/4']);
    const placed = await Promise.all(Object.values(runs).map(async (run) => (await runRow(run.run_id))!.gpu_indices));
    expect(placed).toEqual([[0], [1], [2], [3]]);

    // The gate reports who holds what; the lanes read model and the control plane's preflight agree with it.
    const gateView = await gateClient(stack.gateFixture).dashboard();
    expect(gateView.body.capacity).toMatchObject({ slots: 5, slots_held: 4 });
    expect(Object.fromEntries(gateView.body.capacity.runs.map((run: { run_id: string; gpu_indices: number[] }) => [run.run_id, run.gpu_indices]))).toEqual(
      Object.fromEntries(Object.values(runs).map((run, index) => [run.run_id, [index]])),
    );
    const lanes = (await stack.api('GET', '/control/api/v1/lanes')).body.lanes;
    expect(lanes.map((lane: any) => [lane.lane, lane.idle, lane.active?.run?.gpu_indices ?? null])).toEqual([
      ['gpu-box', false, [0]],
      ['gpu-box/2', false, [1]],
      ['gpu-box/3', false, [2]],
      ['gpu-box/4', false, [3]],
      ['gpu-box/5', true, null],
    ]);
    expect(await rcpLanes()).toEqual([
      'LANE | TARGET | SLOT | STATE | RUN | RUN_STATE | GPUS | NEXT',
      ...Object.values(runs).map((run, index) => expect.stringMatching(new RegExp(`^${run.lane} \\| gpu-box \\| ${index + 1} \\| busy \\| ${run.run_id} \\| \\w+ \\| ${index} \\| -$`))),
      'gpu-box/5 | gpu-box | 5 | idle | - | - | - | -',
    ]);
    const preflight = await stack.api('POST', '/control/api/preflight', { machine_target: 'gpu-box', require_paused: false });
    expect(preflight.body.checks.find((check: any) => check.name === 'worker_capacity_matches')).toMatchObject({ ok: true });
    expect(preflight.body.checks.find((check: any) => check.name === 'worker_no_live_runs')).toMatchObject({ ok: true, detail: '4 of its 5 slots hold runs' });

    // A free slot, but every GPU is held: the two-GPU run waits, and the answer names who holds them.
    await seed('slot-e', { gpu_count: 2 }, { scenario: 'slow', work_sec: 1 });
    const waiting = await dryRun();
    expect(waiting.action).toBe('noop');
    expect(waiting.reason).toContain(`slot-e needs 2 GPUs on gpu-box, none is free (GPU 0 held by ${runs['slot-a']!.run_id};`);

    // The short runs finish on their own quiet windows while the long ones keep working.
    await waitUntil('slot-a and slot-b to complete', async () => ((await completed('slot-a')()) && (await completed('slot-b')())) || undefined, WAIT_MS, 500);
    for (const key of ['slot-c', 'slot-d']) expect(ACTIVE).toContain((await queueItem(key)).status);
    for (const key of ['slot-a', 'slot-b']) expect(await runRow(runs[key]!.run_id)).toMatchObject({ state: 'reconciled' });

    const two = await dispatchLive('slot-e');
    expect((await runRow(two.run_id))!.gpu_indices).toEqual([0, 1]);

    // More memory than any GPU has is refused with the reason, not waited for.
    await seed('slot-f', { gpu_count: 1, gpu_memory_mib: 30_000 }, { scenario: 'slow', work_sec: 1 });
    const refused = await dryRun();
    expect(refused.action).toBe('noop');
    expect(refused.reason).toContain(`slot-f needs 1 GPU with 30000 MiB free on each, but the largest GPU of gpu-box has ${GPU_MEMORY_MIB} MiB`);
    await stack.store.query("UPDATE queue_items SET status = 'paused' WHERE project_id = 'slot-f'");

    await waitUntil('every run to complete', async () => {
      for (const key of ['slot-c', 'slot-d', 'slot-e']) if (!(await completed(key)())) return undefined;
      return true;
    }, WAIT_MS, 500);
    const freed = await dryRun();
    expect(freed.action).toBe('noop');
    expect((await gateClient(stack.gateFixture).dashboard()).body.capacity.slots_held).toBe(0);
  });

  it('runs four real Codex agents at once, each seeing only its own GPU', { timeout: 150_000 }, async () => {
    const keys = ['codex-0', 'codex-1', 'codex-2', 'codex-3'];
    for (const key of keys) {
      responses.script(key, [
        { kind: 'command', cmd: 'mkdir -p results/main && printf "%s" "$CUDA_VISIBLE_DEVICES" > results/main/gpus.txt' },
        ...EVIDENCE.map(({ path, content }) => ({ kind: 'write' as const, path, content })),
        { kind: 'message', text: 'The study is done.' },
      ]);
      await seed(key, { gpu_count: 1 }, {}, 'training');
    }
    const runs = [];
    for (const key of keys) runs.push(await dispatchLive(key));
    expect((await gateClient(stack.gateFixture).dashboard()).body.capacity.slots_held).toBe(4);

    await waitUntil('the four Codex runs to complete', async () => {
      for (const key of keys) if (!(await completed(key)())) return undefined;
      return true;
    }, WAIT_MS, 500);
    const seen = await Promise.all(keys.map((key) => readFile(join(stack.gateFixture.projectRoot, key, 'results', 'main', 'gpus.txt'), 'utf8')));
    const placed = await Promise.all(runs.map(async (run) => (await runRow(run.run_id))!.gpu_indices));
    expect(seen).toEqual(placed.map((indices) => indices.join(',')));
    expect(new Set(seen).size).toBe(4);
    for (const run of runs) expect(await runRow(run.run_id)).toMatchObject({ state: 'reconciled', decision: 'finalize_positive' });
  });
});
