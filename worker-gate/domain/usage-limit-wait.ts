/**
 * When a run whose model refused for a usage limit resumes (docs/worker-gate.md#waiting-out-a-usage-limit). Pure.
 */
import { LIMIT_RESUME_PREFIX, USAGE_LIMIT_MAX_WAIT_SEC, type UsageLimitWait } from '../contract/usage-limit.ts';
import type { RunCause } from '../contract/run-cause.ts';
import type { GateRun } from './gate-run.ts';

/**
 * Past the reset the tool named: the tools word it to the minute, so a reset they name as this minute may still be
 * seconds ahead.
 */
export const RESET_SLACK_SEC = 5;

/** How many usage limits the run has waited out so far. */
export const limitWaitsOf = (run: GateRun): number => (run.resumes ?? []).filter((resume) => resume.resume_id.startsWith(LIMIT_RESUME_PREFIX)).length;

/** The session that hit the limit was itself resumed after one and spent nothing: the limit had not reset after all. */
function limitedAgain(run: GateRun, sessionTokens: number): boolean {
  return (run.resumes?.at(-1)?.resume_id.startsWith(LIMIT_RESUME_PREFIX) ?? false) && sessionTokens === 0;
}

/**
 * The wait a usage-limit end asks for: until the reset the tool named (a few seconds past it), else `backoffSec` from
 * now; at least `backoffSec` when the session resumed after a limit hit it again at once (`sessionTokens`: what that
 * session spent); a week at most. A wait longer than `holdSec` lets the run's slot go meanwhile.
 */
export function usageLimitWait(run: GateRun, limit: { cause: RunCause; sessionTokens: number; now: Date; backoffSec: number; holdSec: number }): UsageLimitWait {
  const { cause, now, backoffSec } = limit;
  const resetsAt = cause.resets_at ? new Date(cause.resets_at) : null;
  const nowMs = now.getTime();
  let resumesMs = resetsAt ? Math.max(resetsAt.getTime(), nowMs) + RESET_SLACK_SEC * 1000 : nowMs + backoffSec * 1000;
  if (limitedAgain(run, limit.sessionTokens)) resumesMs = Math.max(resumesMs, nowMs + backoffSec * 1000);
  resumesMs = Math.min(resumesMs, nowMs + USAGE_LIMIT_MAX_WAIT_SEC * 1000);
  return { resets_at: resetsAt ? resetsAt.toISOString() : null, resumes_at: new Date(resumesMs).toISOString(), holds_slot: resumesMs - nowMs <= limit.holdSec * 1000 };
}
