/**
 * The counts and durations a bench runs with. BENCH_QUICK=1 runs every bench with small counts for seconds, as the
 * test suite does (test/product/benches.test.ts), so a change that breaks a bench fails the suite; its figures then say
 * nothing about the targets. A knob's own variable wins over either (docs/testing.md#benchmarks).
 */
export const QUICK = process.env.BENCH_QUICK === '1';

export function knob(name: string, full: number, quick: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return QUICK ? quick : full;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number of at least 0 (got ${JSON.stringify(raw)})`);
  return value;
}
