import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testPort } from '../support/ports.ts';

// expected duration: ~110 s

/**
 * Every bench script in its quick mode (BENCH_QUICK=1: small counts, seconds; bench/knobs.ts), so a change that
 * breaks a bench fails the suite: a bench that throws, disagrees with its bare server or gets a non-2xx answer exits
 * non-zero. The figures of a quick run say nothing about the targets, so only that they were printed is checked.
 */

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Alone the slowest quick run takes about 30 s; beside three other test files on two cores the memory and dispatch
// benches have taken 80–140 s, so 150 s left them no margin.
const BENCH_TIMEOUT_MS = 240_000;

/** What a bench needs beside BENCH_QUICK: the fleet bench's cluster takes ports handed out to this file. */
async function benchEnv(script: string): Promise<Record<string, string>> {
  if (script !== 'bench/fleet.ts') return {};
  return { BENCH_FLEET_PORTS: (await Promise.all(Array.from({ length: 12 }, () => testPort()))).join(',') };
}

async function runBench(script: string): Promise<{ code: number | null; output: string }> {
  const env = await benchEnv(script);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script], {
      cwd: REPO_ROOT,
      env: { ...process.env, BENCH_QUICK: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), BENCH_TIMEOUT_MS - 5_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** The script, and a line of the report it prints at the end, once every measure is taken. */
const BENCHES: [string, RegExp][] = [
  ['bench/read-events.ts', /^\/control\/api\/v1\/events\?page_size=50 +\d+ /m],
  ['bench/read-models.ts', /^deep page vs first page \(one connection\): p50 [\d.]+ vs [\d.]+ ms/m],
  ['bench/papers.ts', /^\(2\) draft-next dry run p50 \/ p99 +[\d.]+ \/ [\d.]+ ms/m],
  ['bench/dispatch.ts', /^\(c\) doubled +0 /m],
  ['bench/memory.ts', /^control plane alone, pg backend +\d+ +\d+ /m],
  ['bench/automation.ts', /^\(3\) queue check, dry, 100 findings +\d+ /m],
  ['bench/gate-sampler.ts', /^gate's sampling CPU at 8 runs: [\d.]+ % of one core/m],
  ['bench/gate-slots.ts', /^sampler at 8 runs ≤ 1 % of a core: [\d.]+ %/m],
  ['bench/fleet.ts', /^cluster doubled +0 /m],
  ['bench/transcript-stream.ts', /^tool call to dashboard delay p50 \/ p99 \/ max: [\d.]+ \/ [\d.]+ \/ [\d.]+ ms$/m],
];

describe('every bench in its quick mode', () => {
  it('covers every bench script of package.json', () => {
    const scripts = (JSON.parse(readFileSync(`${REPO_ROOT}/package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts;
    const benchFiles = Object.entries(scripts)
      .filter(([name]) => name === 'bench' || name.startsWith('bench:'))
      .map(([, command]) => /^tsx (bench\/\S+\.ts)$/.exec(command)?.[1] ?? command);
    expect(benchFiles.sort()).toEqual(BENCHES.map(([script]) => script).sort());
  });

  it.each(BENCHES)('%s runs to its report', { timeout: BENCH_TIMEOUT_MS }, async (script, reportLine) => {
    const { code, output } = await runBench(script);
    expect(code, output.slice(-4000)).toBe(0);
    expect(output).toMatch(reportLine);
  });
});
