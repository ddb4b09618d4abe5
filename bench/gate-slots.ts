/**
 * Several runs on one worker gate (docs/worker-gate.md#slots-and-gpus): one gate with run_slots 8, served over HTTP in
 * this process as `npm start` serves it, its agent the simulated agent (worker-gate/simulated-agent.sh).
 *   (a) runs per minute with 1 run at a time against 8: the instant simulated agent (SIMULATED_AGENT_WORK_SEC 0),
 *       a new run dispatched as soon as one finishes
 *   (b) the sampler's CPU (the gate's own counter of what its samples cost) with 1 and with 8 runs working (the
 *       simulated agent working for an hour, stopped by a cancel); with all 8 slots held, a 9th run is refused (409)
 *                                                                   target: sampler at 8 runs ≤ 1 % of a core
 * The runs' quiet window is shortened to BENCH_SUSTAIN_SEC (default 1 s) below the config's 30 s minimum, so (a) is
 * the gate's own turnaround (dispatch, the agent's start and end, a quiet sample, the callback); with a real window
 * each run takes idle_sustain_sec longer, and the slots multiply throughput the same way.
 *   npm run bench:gate-slots
 * Knobs (environment): BENCH_SECONDS=60 (each measure) BENCH_SUSTAIN_SEC=1 (BENCH_QUICK=1: 8 s; bench/knobs.ts)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { startWorkerGateOnly, type RunningWorkerGate } from '../bin/worker-gate-process.ts';
import { ConfigFileSchema, type Config } from '../platform/config/schema.ts';
import { loadNow, log } from './figures.ts';
import { knob, QUICK } from './knobs.ts';

const SECONDS = knob('BENCH_SECONDS', 60, 8);
const SUSTAIN_SEC = knob('BENCH_SUSTAIN_SEC', 1, 1);
const SLOTS = 8;
const TARGET_PCT = 1;
const GATE_TOKEN = 'bench-gate-token-0123456789abcdef';
const SIMULATED_AGENT = fileURLToPath(new URL('../worker-gate/simulated-agent.sh', import.meta.url));
/** Gate states after which a run holds no slot. */
const SETTLED = new Set(['wake_ready', 'finished_ready', 'question_pending', 'cancelled', 'error']);

interface Gate {
  running: RunningWorkerGate;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  metrics(): Promise<Map<string, number>>;
}

/** Takes the gate's callbacks as the control plane would, answering 200 at once. */
async function startCallbackSink(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/control/api/worker-callback`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function startGate(dir: string, callbackUrl: string): Promise<Gate> {
  const parsed = ConfigFileSchema.parse({
    roles: ['worker_gate'],
    control_api_bearer_token: 'bench-control-token-0123456789',
    worker_wake_gate_bearer_token: GATE_TOKEN,
    completion_callback_url: callbackUrl,
    completion_callback_token: 'bench-callback-token-012345678',
    state_dir: join(dir, 'state'),
    project_root: join(dir, 'projects'),
    dispatch_script_path: SIMULATED_AGENT,
    listen_host: '127.0.0.1',
    listen_port: 0,
    sample_interval_sec: 1,
    run_slots: SLOTS,
    // The global thresholds, not a built-in profile's longer window; the agents' start costs CPU, none of it theirs to wait out.
    default_workload_class: 'unknown',
    cpu_idle_threshold_pct: 100,
    // The quick mode runs beside other test files, where eight simulated agents starting at once on a loaded machine
    // have taken the 30 s default to print their launch: the bench counts turnaround, and a late start is in its figure.
    dispatch_timeout_sec: 120,
  }) as Config;
  const config: Config = { ...parsed, idle_sustain_sec: SUSTAIN_SEC };
  const running = await startWorkerGateOnly(config, pino({ level: 'silent' }));
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${running.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${GATE_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  const metrics = async () => {
    const text = await (await fetch(`${running.url}/metrics`, { headers: { authorization: `Bearer ${GATE_TOKEN}` } })).text();
    return new Map([...text.matchAll(/^(rcp_gate_[a-z_]+) ([0-9.e+-]+)$/gm)].map((match) => [match[1]!, Number(match[2])]));
  };
  return { running, call, metrics };
}

let runCounter = 0;

/** Prepares a fresh project and dispatches its run; answers the run id, or throws on any answer but 200. */
async function dispatch(gate: Gate): Promise<string> {
  const runId = `slots-${++runCounter}`;
  const run = { run_id: runId, project_id: runId, project_dir: runId, prompt_file: 'prompt.md' };
  const prepared = await gate.call('POST', '/prepare-project', { ...run, prompt_text: `# ${runId}\n` });
  if (prepared.status !== 200) throw new Error(`prepare ${runId}: ${prepared.status} ${JSON.stringify(prepared.body)}`);
  const answer = await gate.call('POST', '/dispatch', { ...run, gpu_indices: [] });
  if (answer.status !== 200) throw new Error(`dispatch ${runId}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return runId;
}

/** The runs the gate shows as settled, of those in `ids`. */
async function settledOf(gate: Gate, ids: ReadonlySet<string>): Promise<string[]> {
  const { body } = await gate.call('GET', '/dashboard/api?limit=500&event_limit=1');
  return (body.runs as { run_id: string; gate_state: string }[]).filter((run) => ids.has(run.run_id) && SETTLED.has(run.gate_state)).map((run) => run.run_id);
}

/**
 * Keeps `inFlight` runs of the instant agent going for SECONDS, each slot dispatching its next run as soon as its last
 * settles (as the control plane's lanes do); answers the runs finished per minute. The runs still going at the end
 * are waited for, so the next measure starts on an idle gate.
 */
async function throughput(gate: Gate, inFlight: number): Promise<{ perMinute: number; finished: number; errors: number }> {
  process.env.SIMULATED_AGENT_WORK_SEC = '0';
  const waiting = new Map<string, () => void>();
  const all = new Set<string>();
  let finished = 0;
  let polling = true;
  const poller = (async () => {
    const givingUp = Date.now() + (SECONDS + 120) * 1000;
    while (polling) {
      if (Date.now() > givingUp) throw new Error(`runs still not settled 2 min after the measure: ${[...waiting.keys()].join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      for (const runId of await settledOf(gate, new Set(waiting.keys()))) {
        waiting.get(runId)?.();
        waiting.delete(runId);
      }
    }
  })();
  const started = performance.now();
  const deadline = started + SECONDS * 1000;
  const slot = async () => {
    while (performance.now() < deadline) {
      const runId = await dispatch(gate);
      all.add(runId);
      await new Promise<void>((resolve) => waiting.set(runId, resolve));
      if (performance.now() <= deadline) finished += 1;
    }
  };
  try {
    await Promise.race([Promise.all(Array.from({ length: inFlight }, slot)), poller]);
  } finally {
    polling = false;
  }
  await poller;
  const { body } = await gate.call('GET', '/dashboard/api?limit=500&event_limit=1');
  const errors = (body.runs as { run_id: string; gate_state: string }[]).filter((run) => all.has(run.run_id) && run.gate_state === 'error').length;
  return { perMinute: finished / (SECONDS / 60), finished, errors };
}

/** With every slot held by a working run, one more run is refused (409), naming the slots. */
async function expectRefused(gate: Gate): Promise<void> {
  const run = { run_id: 'slots-one-too-many', project_id: 'slots-one-too-many', project_dir: 'slots-one-too-many', prompt_file: 'prompt.md' };
  await gate.call('POST', '/prepare-project', { ...run, prompt_text: '# one too many\n' });
  const refused = await gate.call('POST', '/dispatch', run);
  if (refused.status !== 409 || !String(refused.body.detail).startsWith(`all ${SLOTS} slots hold runs: `)) {
    throw new Error(`a run past the ${SLOTS} slots was not refused with 409: ${refused.status} ${JSON.stringify(refused.body)}`);
  }
}

/** The gate's sampling CPU per sample (ms) and as a percentage of one core, with `runs` agents working all along. */
async function samplerCost(gate: Gate, runs: number): Promise<{ perSampleMs: number; pct: number; samples: number; held: number }> {
  process.env.SIMULATED_AGENT_WORK_SEC = '3600';
  const ids: string[] = [];
  try {
    for (let i = 0; i < runs; i++) ids.push(await dispatch(gate));
    if (runs === SLOTS) await expectRefused(gate);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const before = await gate.metrics();
    await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
    const after = await gate.metrics();
    const samples = (after.get('rcp_gate_samples') ?? 0) - (before.get('rcp_gate_samples') ?? 0);
    const cpuMs = ((after.get('rcp_gate_sampling_cpu_seconds') ?? 0) - (before.get('rcp_gate_sampling_cpu_seconds') ?? 0)) * 1000;
    const perSampleMs = samples > 0 ? cpuMs / samples : NaN;
    // One sample a second: ms per sample / 10 is the percentage of one core.
    return { perSampleMs, pct: perSampleMs / 10, samples, held: after.get('rcp_gate_run_slots_held') ?? NaN };
  } finally {
    for (const runId of ids) await gate.call('POST', `/runs/${runId}/cancel`);
  }
}

async function main(): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'rcp-bench-slots-'));
  const savedWork = process.env.SIMULATED_AGENT_WORK_SEC;
  const sink = await startCallbackSink();
  const gate = await startGate(dir, sink.url);
  try {
    log(`gate slots bench: one gate, run_slots ${SLOTS}, the simulated agent, quiet window ${SUSTAIN_SEC} s, ${SECONDS} s per measure, load ${loadNow()}, Node ${process.versions.node}`);
    const one = await throughput(gate, 1);
    const eight = await throughput(gate, SLOTS);
    const samplerOne = await samplerCost(gate, 1);
    const samplerEight = await samplerCost(gate, SLOTS);
    console.log('');
    console.log('measure                                   1 run at a time    8 at once');
    console.log(`(a) runs finished per minute              ${one.perMinute.toFixed(1).padStart(15)}    ${eight.perMinute.toFixed(1).padStart(9)}   (${one.finished} and ${eight.finished} runs, ${one.errors + eight.errors} in error; x${(eight.perMinute / one.perMinute).toFixed(1)})`);
    console.log(`(b) sampler CPU, ms per sample            ${samplerOne.perSampleMs.toFixed(3).padStart(15)}    ${samplerEight.perSampleMs.toFixed(3).padStart(9)}   (${samplerOne.samples} and ${samplerEight.samples} samples; slots held ${samplerOne.held} and ${samplerEight.held})`);
    console.log(`    sampler CPU, % of one core            ${samplerOne.pct.toFixed(3).padStart(15)}    ${samplerEight.pct.toFixed(3).padStart(9)}`);
    const met = samplerEight.pct <= TARGET_PCT;
    console.log(`sampler at ${SLOTS} runs ≤ ${TARGET_PCT} % of a core: ${samplerEight.pct.toFixed(3)} %, ${met ? 'met' : 'MISSED'}`);
    if (QUICK) console.log('(quick mode: the figures say nothing about the target)');
    return met || QUICK ? 0 : 1;
  } finally {
    await gate.running.stop();
    await sink.close();
    if (savedWork === undefined) delete process.env.SIMULATED_AGENT_WORK_SEC;
    else process.env.SIMULATED_AGENT_WORK_SEC = savedWork;
    await rm(dir, { recursive: true, force: true });
  }
}

process.exit(await main());
