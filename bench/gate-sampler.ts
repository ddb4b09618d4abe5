/**
 * CPU cost of the worker gate's sampling loop: sample_interval_sec 1 with 5 tracked runs whose agents are alive,
 * so every tick reads telemetry, scans /proc (stat + cwd of every process) and evaluates each run.
 * Target: < 1 % of one core.
 *   npm run bench:gate-sampler -- [seconds=30] [runs=5]   (or BENCH_SECONDS, BENCH_RUNS; BENCH_QUICK=1: 3 s, 2 runs)
 */
import { chmod, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ConfigFileSchema } from '../config/schema.ts';
import { readProcessTable } from '../worker-gate/process-table.ts';
import { TelemetrySampler } from '../worker-gate/telemetry/sampler.ts';
import { WorkerGate } from '../worker-gate/worker-gate.ts';
import { knob } from './knobs.ts';

const seconds = process.argv[2] ? Number(process.argv[2]) : knob('BENCH_SECONDS', 30, 3);
const runCount = process.argv[3] ? Number(process.argv[3]) : knob('BENCH_RUNS', 5, 2);

function cpuMs(since?: NodeJS.CpuUsage): number {
  const usage = process.cpuUsage(since);
  return (usage.user + usage.system) / 1000;
}

async function timeEach(label: string, iterations: number, fn: () => unknown): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < iterations; i++) await fn();
  const perCall = cpuMs(start) / iterations;
  console.log(`  ${label.padEnd(34)} ${perCall.toFixed(3)} ms CPU per call`);
  return perCall;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'rcp-bench-gate-'));
  const script = join(dir, 'agent.sh');
  // Each "agent" is a sleeping process in its project directory, so the gate tracks a live run.
  await writeFile(script, '#!/bin/sh\nsleep 600 >/dev/null 2>&1 &\necho "{\\"root_pid\\": $!}"\n');
  await chmod(script, 0o755);
  const config = ConfigFileSchema.parse({
    roles: ['worker_gate'],
    control_api_bearer_token: 'bench-control-token-0123456789',
    worker_wake_gate_bearer_token: 'bench-gate-token-0123456789ab',
    completion_callback_url: 'http://127.0.0.1:9/unused',
    completion_callback_token: 'bench-callback-token-012345678',
    state_dir: join(dir, 'state'),
    project_root: join(dir, 'projects'),
    dispatch_script_path: script,
    sample_interval_sec: 1,
  });
  const gate = new WorkerGate({ config, logger: pino({ level: 'silent' }), eventUrl: () => 'http://127.0.0.1:9/legacy-agent/event' });
  await gate.start();
  const rootPids: number[] = [];
  try {
    for (let i = 0; i < runCount; i++) {
      const run = { run_id: `bench-${i}`, project_id: `bench-${i}`, project_dir: `bench-${i}`, prompt_file: 'prompt.md' };
      gate.prepare({ ...run, prompt_text: 'bench', overwrite: false });
      const dispatched = await gate.dispatch({ ...run, mode: 'exec', model: '', reasoning_effort: 'low', sandbox: '' });
      if (dispatched.root_pid) rootPids.push(dispatched.root_pid);
    }
    const processCount = (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).length;
    console.log(`gate sampler bench: ${runCount} tracked runs, sample_interval_sec 1, ${processCount} processes on this machine, ${seconds} s, Node ${process.versions.node}`);

    await new Promise((resolve) => setTimeout(resolve, 2000));
    const before = gate.dashboard(runCount, 1).service.sampling;
    const start = process.cpuUsage();
    const wallStart = performance.now();
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    const processMs = cpuMs(start);
    const wall = performance.now() - wallStart;
    const { service, totals } = gate.dashboard(runCount, 1);
    const samples = service.sampling.samples - before.samples;
    // The gate's own counter: CPU time between the start and the end of each sample (telemetry, /proc scan, evaluation).
    const perSample = service.sampling.cpu_ms_per_sample ?? NaN;
    console.log(`  sampler                            ${perSample.toFixed(3)} ms CPU per sample = ${((perSample / 1000) * 100).toFixed(3)} % of one core (${samples} samples, ${totals.live} live runs; target < 1 %)`);
    console.log(`  whole gate process (for context)   ${((processMs / wall) * 100).toFixed(3)} % of one core, runtime overhead (tsx, GC threads) included`);

    console.log('breakdown (tight loop):');
    const sampler = new TelemetrySampler();
    await timeEach('telemetry sample (/proc/stat, meminfo)', 200, () => sampler.sample());
    await timeEach('process table scan with cwd', 200, () => readProcessTable({ withCwd: true }));
  } finally {
    await gate.stop();
    for (const pid of rootPids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
