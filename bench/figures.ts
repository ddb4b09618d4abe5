import type { ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import autocannon from 'autocannon';

/** What every bench prints its figures with: percentiles, timed loops, HTTP load, and the machine's load. */

export interface Stats {
  n: number;
  p50: number;
  p99: number;
  mean: number;
  max: number;
}

export function stats(samples: readonly number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? NaN;
  const mean = sorted.reduce((sum, value) => sum + value, 0) / Math.max(1, sorted.length);
  return { n: sorted.length, p50: at(0.5), p99: at(0.99), mean, max: sorted.at(-1) ?? NaN };
}

/** Milliseconds with the precision their size deserves. */
export const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(value < 1 ? 3 : value < 10 ? 2 : 1) : '-');

export const yes = (ok: boolean) => (ok ? 'yes' : 'NO');

export const loadNow = () => loadavg().map((value) => value.toFixed(1)).join(' ');

export const log = (message: string) => console.log(`[${new Date().toISOString().slice(11, 23)}] ${message}`);

/** Calls `fn` one call after another and times each. */
export async function timeEach(iterations: number, fn: () => unknown): Promise<Stats> {
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const started = performance.now();
    await fn();
    samples.push(performance.now() - started);
  }
  return stats(samples);
}

export interface LoadFigures {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
}

/** `connections` callers hitting one URL for `durationSec`; any non-2xx answer or error fails the bench. */
export async function httpLoad(url: string, headers: Record<string, string>, durationSec: number, connections: number): Promise<LoadFigures> {
  const result = await autocannon({ url, headers, connections, duration: durationSec });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, requests: result.requests.total };
}

export async function stopBenchServer(server: { child: ChildProcess } | undefined): Promise<void> {
  if (!server || server.child.exitCode !== null) return;
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
}
