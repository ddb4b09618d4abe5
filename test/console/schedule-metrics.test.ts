import { describe, expect, it } from 'vitest';
import { registerScheduleMetrics, type ScheduleTickReading } from '../../capabilities/console/ledger-metrics.ts';
import { ServiceMetrics } from '../../platform/http/metrics.ts';
import { parseExposition, sampleValue } from '../support/prometheus.ts';

const AGE = 'rcp_schedule_last_completed_tick_age_seconds';
const PUMP = { schedule: 'queue_pump', task_queue: 'q' };

/** A schedules reader the test answers by hand: each call waits until the test settles it. */
function handReader() {
  const calls: { resolve: (ticks: ScheduleTickReading[]) => void; reject: (error: Error) => void }[] = [];
  const read = () => new Promise<ScheduleTickReading[]>((resolve, reject) => calls.push({ resolve, reject }));
  return { calls, read };
}

async function scrapeAge(metrics: ServiceMetrics): Promise<{ age: number | undefined; ms: number }> {
  const started = Date.now();
  const samples = parseExposition(await metrics.exposition());
  return { age: sampleValue(samples, AGE, PUMP), ms: Date.now() - started };
}

describe('rcp_schedule_last_completed_tick_age_seconds (docs/operations.md#metrics-and-observability)', () => {
  it('serves the last answer, its age growing, while Temporal answers late or fails, with one read in flight at a time', { timeout: 20_000 }, async () => {
    const metrics = new ServiceMetrics();
    const reader = handReader();
    registerScheduleMetrics(metrics, 'q', [{ schedule: 'queue_pump', intervalSec: 2 }], reader.read);

    // No answer yet and none before: the scrape waits its 2 s, then has no age to give.
    const first = await scrapeAge(metrics);
    expect(first.age).toBeUndefined();
    expect(first.ms).toBeGreaterThanOrEqual(1_900);
    expect(reader.calls).toHaveLength(1);

    // The late answer lands; the next scrape waits on a fresh read, which answers at once.
    reader.calls[0]!.resolve([{ schedule: 'queue_pump', lastCompletedAt: new Date(Date.now() - 10_000) }]);
    await new Promise((resolve) => setTimeout(resolve, 0));
    const answered = scrapeAge(metrics);
    await expect.poll(() => reader.calls.length).toBe(2);
    reader.calls[1]!.resolve([{ schedule: 'queue_pump', lastCompletedAt: new Date(Date.now() - 4_000) }]);
    const fresh = await answered;
    expect(fresh.age).toBeGreaterThanOrEqual(4);
    expect(fresh.age).toBeLessThan(5);

    // Temporal goes quiet: the scrape gives the last answer's completion time, aged by the wait.
    const quiet = await scrapeAge(metrics);
    expect(reader.calls).toHaveLength(3);
    expect(quiet.age).toBeGreaterThanOrEqual(6);
    // The next scrape waits on the read still in flight rather than starting another.
    const stillQuiet = scrapeAge(metrics);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(reader.calls).toHaveLength(3);
    reader.calls[2]!.reject(new Error('UNAVAILABLE'));
    const failed = await stillQuiet;
    expect(failed.age).toBeGreaterThanOrEqual(6);
    expect(failed.ms).toBeLessThan(1_000);
  });
});
