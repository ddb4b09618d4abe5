import { describe, expect, it } from 'vitest';
import { isUsageLimit, usageLimitResetOf } from '../../worker-gate/contract/usage-limit.ts';
import { toolEndCause } from '../../worker-gate/contract/run-cause.ts';
import { RunCauseSchema } from '../../worker-gate/contract/callback-body.ts';
import { applyLifecycleEvent, freshSession } from '../../worker-gate/domain/gate-lifecycle.ts';
import { usageLimitWait } from '../../worker-gate/domain/usage-limit-wait.ts';
import type { GateRun } from '../../worker-gate/domain/gate-run.ts';
import { gateRunAt } from '../support/gate-runs.ts';
import { holdsSlot, retakeConflict, slotHoldersOf } from '../../worker-gate/domain/run-placement.ts';

/** A model's usage limit as the tools word it, and the wait the gate makes of it (docs/worker-gate.md#waiting-out-a-usage-limit). */

// Local wall-clock times below are read in this process's time zone, as the tools write them.
const NOW = new Date(2026, 10, 29, 4, 43, 30);
const local = (hour: number, minute: number, day = 29) => new Date(2026, 10, day, hour, minute).toISOString();

describe('a usage limit in the tools\' words', () => {
  it.each([
    ["You've hit your usage limit. Try again at 4:44 AM.", local(4, 44)],
    ['You’ve hit your usage limit. Upgrade to Pro or try again at 3:51 PM.', local(15, 51)],
    // A time the tool rounded to the minute that is already past is the reset now, not tomorrow's.
    ["You've hit your usage limit. Try again at 4:43 AM.", local(4, 43)],
    // Earlier than that is tomorrow's.
    ["You've hit your usage limit. Try again at 1:05 AM.", local(1, 5, 30)],
    ["You've hit your usage limit. Please try again at Nov 30th, 2026 12:55 AM.", local(0, 55, 30)],
    ["You've hit your usage limit. Upgrade to Pro or try again in 4 days 3 hours.", new Date(NOW.getTime() + (4 * 24 + 3) * 3600_000).toISOString()],
    ['Rate limited: try again in 90 seconds', new Date(NOW.getTime() + 90_000).toISOString()],
    ['Claude AI usage limit reached|1796000000', new Date(1796000000 * 1000).toISOString()],
    ['5-hour limit reached ∙ resets 5pm', local(17, 0)],
  ])('%s: resets at %s', (text, resetsAt) => {
    expect(isUsageLimit(text)).toBe(true);
    expect(usageLimitResetOf(text, NOW)?.toISOString()).toBe(resetsAt);
  });

  it('reads a reset named in UTC as UTC', () => {
    const reset = usageLimitResetOf('You’ve hit your limit · resets 3pm (UTC)', new Date(Date.UTC(2026, 10, 29, 9, 0)));
    expect(reset?.toISOString()).toBe('2026-11-29T15:00:00.000Z');
  });

  it('knows a limit that names no reset, and is not fooled by numbers or other errors', () => {
    for (const text of ['exceeded retry limit, last status: 429 Too Many Requests', 'API Error: Request rejected (429) · this may be a temporary capacity issue', 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}']) {
      expect(isUsageLimit(text), text).toBe(true);
      expect(usageLimitResetOf(text, NOW), text).toBeNull();
    }
    for (const text of ['unexpected status 502 Bad Gateway: upstream', 'input_tokens: 4291, output_tokens: 1429', 'API Error: 500 {"type":"error"}', 'an accurate limitation']) {
      expect(isUsageLimit(text), text).toBe(false);
    }
  });

  it('a tool that ends on one ends with the usage_limit cause, carrying the reset the control plane accepts', () => {
    const cause = toolEndCause({ exitCode: 1, signal: null, lastError: "You've hit your usage limit. Try again at 4:44 AM.", spawnError: null, stoppedOverBudget: false }, NOW);
    expect(cause).toEqual({ kind: 'usage_limit', exit_code: 1, message: "You've hit your usage limit. Try again at 4:44 AM.", resets_at: local(4, 44) });
    expect(RunCauseSchema.parse(cause)).toEqual(cause);
    expect(toolEndCause({ exitCode: 1, signal: null, lastError: 'exceeded retry limit, last status: 429 Too Many Requests', spawnError: null, stoppedOverBudget: false }, NOW)).toEqual({
      kind: 'usage_limit',
      exit_code: 1,
      message: 'exceeded retry limit, last status: 429 Too Many Requests',
    });
    // Another model error stays one.
    expect(toolEndCause({ exitCode: 1, signal: null, lastError: 'unexpected status 500 Internal Server Error', spawnError: null, stoppedOverBudget: false }, NOW)).toMatchObject({ kind: 'model_error', model_status: 500 });
  });
});

function run(resumeIds: string[] = []): GateRun {
  return gateRunAt(NOW.toISOString(), { resumes: resumeIds.map((resume_id) => ({ resume_id, at: NOW.toISOString(), prompt_sha256: 'x', allowed_tools: [] })) });
}

describe('the wait a usage limit asks for', () => {
  const later = (sec: number) => new Date(NOW.getTime() + sec * 1000).toISOString();

  it('waits until a few seconds past the reset the tool named, or now when it named one just past', () => {
    expect(usageLimitWait(run(), { cause: { kind: 'usage_limit', resets_at: later(60) }, sessionTokens: 500, now: NOW, backoffSec: 900, holdSec: 600 })).toEqual({ resets_at: later(60), resumes_at: later(65), holds_slot: true });
    expect(usageLimitWait(run(), { cause: { kind: 'usage_limit', resets_at: later(-20) }, sessionTokens: 500, now: NOW, backoffSec: 900, holdSec: 600 }).resumes_at).toBe(later(5));
  });

  it('waits usage_limit_backoff_sec when no reset was named, and a week at most', () => {
    expect(usageLimitWait(run(), { cause: { kind: 'usage_limit' }, sessionTokens: 0, now: NOW, backoffSec: 900, holdSec: 600 })).toEqual({ resets_at: null, resumes_at: later(900), holds_slot: false });
    expect(usageLimitWait(run(), { cause: { kind: 'usage_limit', resets_at: later(30 * 24 * 3600) }, sessionTokens: 0, now: NOW, backoffSec: 900, holdSec: 600 }).resumes_at).toBe(later(7 * 24 * 3600));
  });

  it('lets the slot go for a wait longer than usage_limit_hold_sec, and a run so waiting holds no slot', () => {
    const short = usageLimitWait(run(), { cause: { kind: 'usage_limit', resets_at: later(595) }, sessionTokens: 1, now: NOW, backoffSec: 900, holdSec: 600 });
    const long = usageLimitWait(run(), { cause: { kind: 'usage_limit', resets_at: later(596) }, sessionTokens: 1, now: NOW, backoffSec: 900, holdSec: 600 });
    expect([short.holds_slot, long.holds_slot]).toEqual([true, false]);
    const waiting = (wait: typeof short): GateRun => ({ ...run(), gate_state: 'usage_limited', usage_limit: wait });
    expect(slotHoldersOf([waiting(short), waiting(long)]).map((holder) => holder.run_id)).toEqual(['r-1']);
    // A record from before holds_slot existed keeps its slot.
    expect(holdsSlot({ ...run(), gate_state: 'usage_limited', usage_limit: { resets_at: null, resumes_at: later(5) } })).toBe(true);
  });

  it('a run taking its slot back finds it held, or its GPUs or CPUs taken, or free', () => {
    const waiting: GateRun = { ...run(), gate_state: 'usage_limited', gpu_indices: [1], cpus: [2, 3] };
    expect(retakeConflict(waiting, [{ run_id: 'r-2', gpu_indices: [0], cpus: [0, 1] }], 2)).toBeNull();
    expect(retakeConflict(waiting, [{ run_id: 'r-2', gpu_indices: null, cpus: null }], 1)).toBe("all 1 slots hold runs: r-2");
    expect(retakeConflict(waiting, [{ run_id: 'r-2', gpu_indices: [1], cpus: [3] }], 4)).toBe("GPU 1 is held by run 'r-2'; CPU 3 is held by run 'r-2'");
    // Its own record among the holders is not a conflict.
    expect(retakeConflict(waiting, [{ run_id: 'r-1', gpu_indices: [1], cpus: [2, 3] }], 1)).toBeNull();
  });

  it('a session resumed after a limit that hits it again before spending anything waits at least the backoff', () => {
    const again = { cause: { kind: 'usage_limit' as const, resets_at: later(-10) }, now: NOW, backoffSec: 900, holdSec: 600 };
    expect(usageLimitWait(run(['limit-1']), { ...again, sessionTokens: 0 }).resumes_at).toBe(later(900));
    // One that got work done hit a new limit: its named reset holds.
    expect(usageLimitWait(run(['limit-1']), { ...again, sessionTokens: 2_000 }).resumes_at).toBe(later(5));
    expect(usageLimitWait(run(['answer-1']), { ...again, sessionTokens: 0 }).resumes_at).toBe(later(5));
  });

  it('an end on a usage limit settles the session in usage_limited with one usage_limited callback; later events change nothing', () => {
    const wait = { resets_at: later(60), resumes_at: later(65) };
    const ended = applyLifecycleEvent(freshSession('s-1'), { event: 'session-end', session_id: 's-1', exit_code: 1, usage_limit: wait, received_at: NOW.toISOString() });
    expect(ended.session).toMatchObject({ gate_state: 'usage_limited', usage_limit: wait });
    expect(ended.session.gate_reason).toContain(`resumes at ${wait.resumes_at}`);
    expect(ended.callbacks.map((callback) => callback.event_type)).toEqual(['usage_limited']);
    const idle = applyLifecycleEvent(ended.session, { event: 'session-idle', session_id: 's-1', received_at: later(1) });
    expect(idle.callbacks).toEqual([]);
    expect(idle.ignored_reason).toContain('usage_limited');
  });
});
