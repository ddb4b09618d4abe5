/**
 * The transcript stream's cost (docs/runs.md#following-a-run-live): the control plane alone on the `pg` backend, as a
 * process of its own, first with nothing streaming, then with BENCH_RUNS runs streaming at once, each watched by one
 * dashboard (an SSE client). This process plays the worker gate with the gate's own transcript code
 * (worker-gate/transcripts/): each run's tool stream is a Codex `--json` file it appends a command to every
 * BENCH_CALL_MS, which the gate's tail reads and pushes as it does on a worker.
 *   (1) the control plane's RSS and CPU (% of one core) with none streaming and with BENCH_RUNS
 *   (2) the delay from a tool call written to the stream to its entry on a watching page
 *                                                        target: p99 under 1,000 ms on this machine
 *   npm run bench:transcript-stream
 * Knobs (environment): BENCH_RUNS=20 BENCH_SECONDS=20 BENCH_CALL_MS=500 (BENCH_QUICK=1: 4 runs, 3 s; bench/knobs.ts)
 */
import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import pino from 'pino';
import { RunTranscripts } from '../worker-gate/transcripts/run-transcripts.ts';
import type { GateRun } from '../worker-gate/domain/gate-run.ts';
import { AGENT_RECORD_FILES } from '../worker-gate/launchers/records.ts';
import { stats, ms, loadNow, yes } from './figures.ts';
import { knob, QUICK } from './knobs.ts';
import { benchDatabaseUrl, dropDatabase, ensureDatabase, percentileTable } from './support.ts';
import { rssKib, START_ARGS, waitForBanner, writePgControlPlaneConfig } from './support/service-process.ts';
import { cpuSeconds, snapshot, withDescendants } from './support/process-cpu.ts';

const RUNS = knob('BENCH_RUNS', 20, 4);
const SECONDS = knob('BENCH_SECONDS', 20, 3);
const CALL_MS = knob('BENCH_CALL_MS', 500, 500);
const TARGET_MS = 1000;
const DATABASE = QUICK ? `rcp_bench_transcript_quick_${process.pid}` : 'rcp_bench_transcript';
const TOKEN = 'bench-transcript-token-0123456789abcdef';
const CALLBACK_TOKEN = 'bench-transcript-callback-0123456789';

const mib = (kib: number) => Math.round(kib / 1024);
const sleep = (msec: number) => new Promise<void>((resolve) => setTimeout(resolve, msec));

async function startControlPlane(dir: string): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  await ensureDatabase(DATABASE);
  const configPath = writePgControlPlaneConfig(dir, { database: DATABASE, token: TOKEN, callbackToken: CALLBACK_TOKEN });
  const child = spawn(process.execPath, START_ARGS, { cwd: dir, env: { ...process.env, LOG_LEVEL: 'warn', SVC_CONFIG: configPath }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = await waitForBanner(child, () => output);
  return { url, pid: child.pid!, stop: async () => void (child.kill('SIGINT'), await exited) };
}

/** The runs the gate streams for, in the ledger as a dispatch leaves them. */
async function seedRuns(): Promise<string[]> {
  const client = new pg.Client({ connectionString: benchDatabaseUrl(DATABASE) });
  await client.connect();
  try {
    const runIds: string[] = [];
    for (let n = 1; n <= RUNS; n++) {
      const project = `bench-stream-${process.pid}-${n}`;
      const runId = `${project}-20261129T000000Z`;
      await client.query(`INSERT INTO projects (project_id, project_name, project_dir, workload_class) VALUES ($1, $1, $1, 'unknown')`, [project]);
      await client.query(
        `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by) VALUES ($1, $2, $1, 'running', 'bench', 'http://127.0.0.1:9', 'unknown', 'bench')`,
        [runId, project],
      );
      runIds.push(runId);
    }
    return runIds;
  } finally {
    await client.end();
  }
}

/** A page watching one run: the delay of each tool call it is sent, from the time written into the command. */
async function watch(url: string, runId: string, delays: number[], signal: AbortSignal): Promise<void> {
  const response = await fetch(`${url}/control/api/v1/runs/${runId}/transcript/stream`, { headers: { authorization: `Bearer ${TOKEN}` }, signal });
  if (response.status !== 200) throw new Error(`the stream of ${runId} answered ${response.status}`);
  const decoder = new TextDecoder();
  let buffered = '';
  try {
    for await (const chunk of response.body!) {
      buffered += decoder.decode(chunk as Uint8Array, { stream: true });
      let boundary: number;
      while ((boundary = buffered.indexOf('\n\n')) !== -1) {
        const block = buffered.slice(0, boundary);
        buffered = buffered.slice(boundary + 2);
        const written = /"kind":"tool_call".*bench-step written=(\d+)/.exec(block)?.[1];
        if (written) delays.push(Date.now() - Number(written));
      }
    }
  } catch (error) {
    if (!signal.aborted) throw error;
  }
}

/** CPU (% of one core) and peak RSS of `pid` while `during` runs. */
async function cost(pid: number, during: () => Promise<void>): Promise<{ cpuPct: number; rssMib: number }> {
  let peak = rssKib(pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssKib(pid))), 200);
  const before = snapshot();
  const started = Date.now();
  await during();
  const after = snapshot();
  clearInterval(sampler);
  const seconds = cpuSeconds(before, after, withDescendants(after, [pid]));
  return { cpuPct: (100 * seconds) / ((Date.now() - started) / 1000), rssMib: mib(peak) };
}

const dir = mkdtempSync(join(tmpdir(), 'rcp-bench-transcript-'));
const controlPlane = await startControlPlane(dir);
try {
  console.log(`control plane (pg) at ${controlPlane.url}; ${RUNS} runs, a tool call each every ${CALL_MS} ms, for ${SECONDS} s; load ${loadNow()}`);
  const runIds = await seedRuns();
  await sleep(2000);
  const none = await cost(controlPlane.pid, () => sleep(SECONDS * 1000));

  const gateRun = { gate_state: 'running' } as GateRun;
  const transcripts = new RunTranscripts({
    dir: join(dir, 'gate-transcripts'),
    urls: [`${controlPlane.url}/control/api/worker-transcript`],
    token: CALLBACK_TOKEN,
    timeoutSec: 10,
    logger: pino({ level: 'warn' }),
    secrets: [CALLBACK_TOKEN],
    runOf: () => gateRun,
  });
  transcripts.load();
  const streams = runIds.map((runId) => {
    const records = join(dir, 'records', runId);
    mkdirSync(records, { recursive: true, mode: 0o700 });
    const file = join(records, AGENT_RECORD_FILES.events);
    writeFileSync(file, '');
    transcripts.launched(runId, 'codex', records);
    return file;
  });
  transcripts.start();
  const delays: number[] = [];
  const pages = new AbortController();
  const watching = runIds.map((runId) => watch(controlPlane.url, runId, delays, pages.signal));
  await sleep(1000);
  let calls = 0;
  const streaming = await cost(controlPlane.pid, async () => {
    const stopAt = Date.now() + SECONDS * 1000;
    // The runs' calls are spread over each interval, as independent agents' are.
    const writers = streams.map(async (file, n) => {
      await sleep((CALL_MS * n) / streams.length);
      for (let step = 1; Date.now() < stopAt; step++) {
        const command = `bench-step written=${Date.now()} python train.py --step ${step}`;
        appendFileSync(file, `${JSON.stringify({ type: 'item.started', item: { id: `c${step}`, type: 'command_execution', command, status: 'in_progress' } })}\n`);
        appendFileSync(file, `${JSON.stringify({ type: 'item.completed', item: { id: `c${step}`, type: 'command_execution', command, aggregated_output: `step ${step} done\n`, exit_code: 0, status: 'completed' } })}\n`);
        calls += 1;
        await sleep(CALL_MS);
      }
    });
    await Promise.all(writers);
    await sleep(1500);
  });
  pages.abort();
  await Promise.all(watching);
  await transcripts.stop();
  if (delays.length < calls * 0.95) throw new Error(`the pages saw ${delays.length} of ${calls} tool calls`);

  const delay = stats(delays);
  console.log(`\nnode ${process.version}, load ${loadNow()}\n`);
  console.log(
    percentileTable([
      { streaming: 'none', runs: 0, 'control plane RSS MiB (peak)': none.rssMib, 'CPU % of a core': none.cpuPct.toFixed(1) },
      { streaming: `${RUNS} runs, one watcher each`, runs: RUNS, 'control plane RSS MiB (peak)': streaming.rssMib, 'CPU % of a core': streaming.cpuPct.toFixed(1) },
    ]),
  );
  console.log(`\ntool calls written: ${calls}, entries pushed: ${calls * 2}, seen by the pages: ${delays.length}`);
  console.log(`tool call to dashboard delay p50 / p99 / max: ${ms(delay.p50)} / ${ms(delay.p99)} / ${ms(delay.max)} ms`);
  console.log(`p99 under ${TARGET_MS} ms: ${yes(delay.p99 < TARGET_MS)}`);
} finally {
  await controlPlane.stop();
  rmSync(dir, { recursive: true, force: true });
  if (QUICK) await dropDatabase(DATABASE);
}
