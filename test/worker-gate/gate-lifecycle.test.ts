import { describe, expect, it } from 'vitest';
import {
  applyLifecycleEvent,
  freshSession,
  isAwaitingQuietWindow,
  readyCallbackFor,
  type GateSession,
  type LifecycleInput,
} from '../../worker-gate/domain/gate-lifecycle.ts';
import type { LifecycleEvent } from '../../worker-gate/contract/gate-names.ts';

const at = (second: number) => new Date(Date.UTC(2026, 10, 22, 12, 0, second)).toISOString();

/** Applies events in order (one second apart) and collects every callback they asked for. */
function play(events: (LifecycleEvent | Partial<LifecycleInput>)[], start: GateSession = freshSession()) {
  let session = start;
  const callbacks: string[] = [];
  const ignored: (string | undefined)[] = [];
  events.forEach((item, index) => {
    const input = typeof item === 'string' ? { event: item } : item;
    const outcome = applyLifecycleEvent(session, { session_id: 's-1', received_at: at(index), ...input } as LifecycleInput);
    session = outcome.session;
    callbacks.push(...outcome.callbacks.map((c) => `${c.event_type}@${c.observed_at}`));
    ignored.push(outcome.ignored_reason);
  });
  return { session, callbacks, ignored };
}

describe('lifecycle events', () => {
  it.each<[string, LifecycleEvent[], Partial<GateSession>, string[]]>([
    ['start', ['session-start'], { gate_state: 'running', session_started_at: at(0) }, [`session_started@${at(0)}`]],
    ['start, idle', ['session-start', 'session-idle'], { gate_state: 'pending_idle_gate', idle_seen_at: at(1), ended: false }, [`session_started@${at(0)}`]],
    ['start, stop', ['session-start', 'session-stop'], { gate_state: 'pending_idle_gate', idle_seen_at: at(1) }, [`session_started@${at(0)}`]],
    ['start, end', ['session-start', 'session-end'], { gate_state: 'finished_pending_gate', idle_seen_at: at(1), ended: true }, [`session_started@${at(0)}`]],
    ['idle, then end keeps the first idle time', ['session-idle', 'session-end'], { gate_state: 'finished_pending_gate', idle_seen_at: at(0), ended: true }, [`session_started@${at(0)}`]],
    ['ask', ['session-start', 'ask-user-question'], { gate_state: 'question_pending' }, [`session_started@${at(0)}`, `question_pending@${at(1)}`]],
    ['end without start: the start was lost', ['session-end'], { gate_state: 'finished_pending_gate', session_started_at: at(0) }, [`session_started@${at(0)}`]],
    ['ask without start', ['ask-user-question'], { gate_state: 'question_pending', session_started_at: at(0) }, [`session_started@${at(0)}`, `question_pending@${at(0)}`]],
  ])('%s', (_name, events, expected, callbacks) => {
    const result = play(events);
    expect(result.session).toMatchObject(expected);
    expect(result.callbacks).toEqual(callbacks);
  });

  it.each<[LifecycleEvent, LifecycleEvent]>([
    ['session-idle', 'session-start'],
    ['session-stop', 'session-idle'],
    ['session-stop', 'ask-user-question'],
    ['session-end', 'session-idle'],
    ['session-end', 'session-start'],
  ])('ignores %s followed by the lower-ranked %s', (first, second) => {
    const result = play([first, second]);
    expect(result.ignored[1]).toMatch(/ranks below/);
    expect(result.session.last_event).toBe(first);
  });

  it('treats stop and end as equal rank: an end after a stop turns the wait into a finished one', () => {
    const result = play(['session-stop', 'session-end']);
    expect(result.ignored).toEqual([undefined, undefined]);
    expect(result.session).toMatchObject({ gate_state: 'finished_pending_gate', ended: true, idle_seen_at: at(0) });
  });

  it('reports no start for a failed end without one (the agent may never have run), and one for a stop over budget', () => {
    expect(play([{ event: 'session-end', exit_code: 127 }])).toMatchObject({ callbacks: [`gate_error@${at(0)}`], session: { session_started_at: null } });
    const overBudget = play([{ event: 'session-end', exit_code: 143, token_budget_exceeded: { budget: 10, tokens_used: 12 } }]);
    expect(overBudget.callbacks).toEqual([`session_started@${at(0)}`, `gate_error@${at(0)}`]);
  });

  it('sends session_started once per session, whichever event shows it first, however often start is posted', () => {
    expect(play(['session-idle', 'session-start', 'session-idle']).callbacks).toEqual([`session_started@${at(0)}`]);

    expect(play(['session-start', 'session-start', 'session-start']).callbacks).toEqual([`session_started@${at(0)}`]);
  });

  it('keeps idle_seen_at at the first report, so repeated idle events keep one idempotency key', () => {
    const result = play(['session-idle', 'session-idle', 'session-stop', 'session-idle']);
    expect(result.session.idle_seen_at).toBe(at(0));
    expect(result.callbacks).toEqual([`session_started@${at(0)}`]);
  });

  it.each(['wake_ready', 'finished_ready', 'question_pending', 'error', 'cancelled'] as const)(
    'changes nothing once settled in %s',
    (state) => {
      const settled: GateSession = { ...freshSession('s-1'), gate_state: state, last_event: 'session-idle', idle_seen_at: at(0) };
      for (const event of ['session-idle', 'session-end', 'ask-user-question', 'session-start'] as const) {
        const outcome = applyLifecycleEvent(settled, { event, session_id: 's-1', received_at: at(5) });
        expect(outcome.ignored_reason).toMatch(/already settled/);
        expect(outcome.callbacks).toEqual([]);
        expect(outcome.session).toEqual(settled);
      }
    },
  );

  it('starts over when a new session_id arrives, even after the old session settled', () => {
    const settled: GateSession = { ...freshSession('s-1'), gate_state: 'wake_ready', last_event: 'session-end', ended: true, idle_seen_at: at(0) };
    const outcome = applyLifecycleEvent(settled, { event: 'session-start', session_id: 's-2', received_at: at(9) });
    expect(outcome.session_reset).toBe(true);
    expect(outcome.session).toMatchObject({ session_id: 's-2', gate_state: 'running', ended: false, idle_seen_at: null, session_started_at: at(9) });
    expect(outcome.callbacks).toEqual([{ event_type: 'session_started', observed_at: at(9) }]);
  });

  it('adopts the first session_id it sees and keeps it when later events carry none', () => {
    const first = applyLifecycleEvent(freshSession(), { event: 'session-start', session_id: 's-9', received_at: at(0) });
    expect(first.session.session_id).toBe('s-9');
    const next = applyLifecycleEvent(first.session, { event: 'session-idle', received_at: at(1) });
    expect(next.session_reset).toBe(false);
    expect(next.session.session_id).toBe('s-9');
  });

  it('records the question, or the message when no question field is given', () => {
    expect(play([{ event: 'ask-user-question', question: 'Which split?' }]).session.question).toBe('Which split?');
    expect(play([{ event: 'ask-user-question', message: 'Need input' }]).session.question).toBe('Need input');
  });
});

describe('readiness', () => {
  it('reports wake_ready after idle or stop and session_finished_ready after end', () => {
    expect(readyCallbackFor(play(['session-idle']).session)).toEqual({ event_type: 'wake_ready', gate_state: 'wake_ready' });
    expect(readyCallbackFor(play(['session-stop']).session)).toEqual({ event_type: 'wake_ready', gate_state: 'wake_ready' });
    expect(readyCallbackFor(play(['session-end']).session)).toEqual({ event_type: 'session_finished_ready', gate_state: 'finished_ready' });
  });

  it('awaits the quiet window only between an idle report and settling', () => {
    expect(isAwaitingQuietWindow(play(['session-start']).session)).toBe(false);
    expect(isAwaitingQuietWindow(play(['session-idle']).session)).toBe(true);
    expect(isAwaitingQuietWindow(play(['session-end']).session)).toBe(true);
    expect(isAwaitingQuietWindow(play(['ask-user-question']).session)).toBe(false);
    expect(isAwaitingQuietWindow({ ...play(['session-idle']).session, gate_state: 'wake_ready' })).toBe(false);
  });
});
