/**
 * How long a run has waited on its quiet window, and whether that is far longer than the window itself: such a run
 * needs a person (docs/worker-gate.md#worker-gate), since something keeps it from being judged finished. Pure.
 */

/** A run waiting more than this many times its idle_sustain_sec is overdue. */
export const QUIET_WINDOW_OVERDUE_FACTOR = 3;

export interface QuietWindowWait {
  /** What the window judged: the run's own use or the whole machine's (config quiet_window_scope). */
  scope: 'run' | 'machine';
  idle_sustain_sec: number;
  /** Seconds since idle, stop or end was first seen. */
  waiting_sec: number;
  overdue: boolean;
}

export function quietWindowWait(input: { scope: 'run' | 'machine'; idleSeenAtMs: number; nowMs: number; idleSustainSec: number; ready: boolean }): QuietWindowWait {
  const waitingSec = Math.max(0, Math.round((input.nowMs - input.idleSeenAtMs) / 1000));
  return {
    scope: input.scope,
    idle_sustain_sec: input.idleSustainSec,
    waiting_sec: waitingSec,
    overdue: !input.ready && waitingSec > QUIET_WINDOW_OVERDUE_FACTOR * input.idleSustainSec,
  };
}
