/**
 * How long a run may hold its slot before an operator should look (docs/runs.md#slots-and-gpus): the upper end of its
 * candidate's estimated_runtime_class, a day when it has none. The RcpSlotHeldPastExpectedRuntime rule compares it
 * with how long the run has held the slot.
 */
const HOUR_SEC = 3600;
const DAY_SEC = 24 * HOUR_SEC;

export const EXPECTED_RUNTIME_SEC: Readonly<Record<string, number>> = {
  minutes: HOUR_SEC,
  hours: 12 * HOUR_SEC,
  overnight: DAY_SEC,
  days: 7 * DAY_SEC,
  week_plus: 30 * DAY_SEC,
};

export const DEFAULT_EXPECTED_RUNTIME_SEC = DAY_SEC;

export const expectedRuntimeSec = (runtimeClass: string | null): number =>
  (runtimeClass !== null ? EXPECTED_RUNTIME_SEC[runtimeClass] : undefined) ?? DEFAULT_EXPECTED_RUNTIME_SEC;
