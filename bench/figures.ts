import type { ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import autocannon from 'autocannon';
import { payloadHash } from '../platform/http/payload-hash.ts';

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

/**
 * The app and the bare server under the same load, `durationSec` each, taken in alternating slices of at least a
 * second: this machine's load drifts over a run (other processes, CPU frequency), and a drift that lands on one side
 * alone would show as a difference between them. req/s is over the whole time; p50 is the median of the slices' and
 * p99 the worst slice's.
 */
export async function loadSideBySide(
  urls: { app: string; bare: string },
  headers: Record<string, string>,
  durationSec: number,
  connections: number,
): Promise<{ app: LoadFigures; bare: LoadFigures }> {
  const slices = Math.max(1, Math.floor(durationSec));
  const taken: { app: LoadFigures[]; bare: LoadFigures[] } = { app: [], bare: [] };
  for (let slice = 0; slice < slices; slice++) {
    // Which side goes first alternates too, so neither always follows the other's load.
    const order = slice % 2 === 0 ? (['app', 'bare'] as const) : (['bare', 'app'] as const);
    for (const side of order) taken[side].push(await httpLoad(urls[side], headers, durationSec / slices, connections));
  }
  const combine = (figures: LoadFigures[]): LoadFigures => {
    const requests = figures.reduce((sum, f) => sum + f.requests, 0);
    const p50s = figures.map((f) => f.p50).sort((a, b) => a - b);
    return { rps: requests / durationSec, p50: p50s[Math.floor((p50s.length - 1) / 2)]!, p99: Math.max(...figures.map((f) => f.p99)), requests };
  };
  return { app: combine(taken.app), bare: combine(taken.bare) };
}

/** Both sides answer `path` with the same body (key order aside), so they do the same work; fails the bench if not. */
export async function checkSameAnswer(appPort: number, barePort: number, path: string, headers: Record<string, string>): Promise<void> {
  const read = async (port: number) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers });
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${(await response.text()).slice(0, 400)}`);
    return payloadHash(await response.json());
  };
  const [app, bare] = await Promise.all([read(appPort), read(barePort)]);
  if (app !== bare) throw new Error(`${path}: the app and the bare server answer differently`);
}

/** Load before measuring, so JIT and pool connections are in place; none when `durationSec` is 0 (a quick run). */
export async function warmUp(urls: string[], headers: Record<string, string>, durationSec: number, connections: number): Promise<void> {
  if (durationSec <= 0) return;
  for (const url of urls) await httpLoad(url, headers, durationSec, connections);
}

export async function stopBenchServer(server: { child: ChildProcess } | undefined): Promise<void> {
  if (!server || server.child.exitCode !== null) return;
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
}
