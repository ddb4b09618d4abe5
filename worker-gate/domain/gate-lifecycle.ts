import {
  LIFECYCLE_EVENT_RANK,
  SETTLED_GATE_STATES,
  type CallbackEventType,
  type GateState,
  type LifecycleEvent,
} from '../contract/gate-names.ts';
import type { AgentQuestion } from '../contract/agent-question.ts';
import type { UsageLimitWait } from '../contract/usage-limit.ts';

/** The part of a gate run record that lifecycle events change. Times are ISO 8601 strings from the gate's clock. */
export interface GateSession {
  session_id: string | null;
  last_event: LifecycleEvent | null;
  last_event_at: string | null;
  session_started_at: string | null;
  /** When idle, stop or end was first reported in this session: the quiet window and the timeout count from here. */
  idle_seen_at: string | null;
  /** An end event was seen: readiness is reported as session_finished_ready rather than wake_ready. */
  ended: boolean;
  question: string | null;
  /** The pending question with its choices, or the tool call a permission request is for; absent from older records. */
  question_detail?: AgentQuestion | null;
  /** While the run waits out the model's usage limit: when its session resumes; absent from older records. */
  usage_limit?: UsageLimitWait | null;
  gate_state: GateState;
  gate_reason: string;
}


export interface LifecycleInput {
  event: LifecycleEvent;
  session_id?: string | undefined;
  question?: string | undefined;
  question_detail?: AgentQuestion | undefined;
  message?: string | undefined;
  /** With session-end: how the agent's process ended, as its launcher saw it; non-zero ends the run in error. */
  exit_code?: number | undefined;
  /** With session-end: the launcher stopped the agent past this token budget, having seen `tokens_used`. */
  token_budget_exceeded?: { budget: number; tokens_used: number } | undefined;
  /** With session-end: the model refused for a usage limit, and the run waits until then. */
  usage_limit?: UsageLimitWait | undefined;
  /** Gate clock time the event was received. */
  received_at: string;
}

export interface LifecycleOutcome {
  session: GateSession;
  /** Callbacks to send now, with the time that goes into their idempotency key. */
  callbacks: { event_type: CallbackEventType; observed_at: string }[];
  /** Set when the event was recorded but changed nothing. */
  ignored_reason?: string;
  /** A different session_id arrived: the record was reset before the event applied. */
  session_reset: boolean;
}

export function freshSession(sessionId: string | null = null): GateSession {
  return {
    session_id: sessionId,
    last_event: null,
    last_event_at: null,
    session_started_at: null,
    idle_seen_at: null,
    ended: false,
    question: null,
    question_detail: null,
    gate_state: 'running',
    gate_reason: 'dispatched; waiting for the agent to report',
  };
}

/**
 * Applies one lifecycle event. Precedence start < idle < ask < stop = end holds within a session; a new session_id
 * starts over. Once the gate has settled (ready, question, error) later events of the same session change nothing,
 * so repeated idle events never produce a second callback.
 */
export function applyLifecycleEvent(current: GateSession, input: LifecycleInput): LifecycleOutcome {
  const incomingSession = input.session_id ?? null;
  const sessionReset = incomingSession !== null && current.session_id !== null && incomingSession !== current.session_id;
  const base: GateSession = sessionReset
    ? freshSession(incomingSession)
    : { ...current, session_id: current.session_id ?? incomingSession };

  const ignore = (reason: string): LifecycleOutcome => ({
    session: base,
    callbacks: [],
    ignored_reason: reason,
    session_reset: sessionReset,
  });

  if (SETTLED_GATE_STATES.has(base.gate_state)) {
    return ignore(`gate already settled in state ${base.gate_state}`);
  }
  if (base.last_event && LIFECYCLE_EVENT_RANK[input.event] < LIFECYCLE_EVENT_RANK[base.last_event]) {
    return ignore(`${input.event} ranks below the earlier ${base.last_event}`);
  }

  const session: GateSession = { ...base, last_event: input.event, last_event_at: input.received_at };
  const callbacks: LifecycleOutcome['callbacks'] = [];
  // A hook's start report can be lost or overtaken (a loaded host, a hook past its timeout): any event that shows the
  // session ran tells the control plane it started, before anything else.
  if (session.session_started_at === null && showsSessionStarted(input)) {
    session.session_started_at = input.received_at;
    callbacks.push({ event_type: 'session_started', observed_at: input.received_at });
  }

  switch (input.event) {
    case 'session-start':
      session.gate_reason = 'agent session running';
      break;
    case 'session-idle':
    case 'session-stop':
      session.idle_seen_at ??= input.received_at;
      if (!session.ended) {
        session.gate_state = 'pending_idle_gate';
        session.gate_reason = `agent reported ${input.event}; waiting for processes to exit and a quiet window`;
      }
      break;
    case 'session-end':
      if (input.token_budget_exceeded) {
        const { budget, tokens_used } = input.token_budget_exceeded;
        session.gate_state = 'error';
        session.gate_reason = `token budget exceeded: the agent spent ${tokens_used} tokens of its budget of ${budget}, and the gate stopped it`;
        callbacks.push({ event_type: 'gate_error', observed_at: input.received_at });
        break;
      }
      if (input.usage_limit) {
        session.usage_limit = input.usage_limit;
        session.gate_state = 'usage_limited';
        session.gate_reason = `the model refused for a usage limit; the session resumes at ${input.usage_limit.resumes_at}`;
        callbacks.push({ event_type: 'usage_limited', observed_at: input.received_at });
        break;
      }
      if (input.exit_code !== undefined && input.exit_code !== 0) {
        session.gate_state = 'error';
        session.gate_reason = `the agent exited with status ${input.exit_code}`;
        callbacks.push({ event_type: 'gate_error', observed_at: input.received_at });
        break;
      }
      session.idle_seen_at ??= input.received_at;
      session.ended = true;
      session.gate_state = 'finished_pending_gate';
      session.gate_reason = 'agent reported session-end; waiting for processes to exit and a quiet window';
      break;
    case 'ask-user-question':
      session.question = input.question ?? input.message ?? null;
      session.question_detail = input.question_detail ?? null;
      session.gate_state = 'question_pending';
      session.gate_reason = 'agent asked a question and waits for a person';
      callbacks.push({ event_type: 'question_pending', observed_at: input.received_at });
      break;
  }
  return { session, callbacks, session_reset: sessionReset };
}

/**
 * Every event shows its session started, but an end with a non-zero status: an agent that never got going (a missing
 * binary, a refused key) sends that too.
 */
function showsSessionStarted(input: LifecycleInput): boolean {
  if (input.event === 'session-end') return input.token_budget_exceeded !== undefined || (input.exit_code ?? 0) === 0;
  return true;
}

/** The callback that announces readiness for a session in this state. */
export function readyCallbackFor(session: GateSession): { event_type: CallbackEventType; gate_state: GateState } {
  return session.ended
    ? { event_type: 'session_finished_ready', gate_state: 'finished_ready' }
    : { event_type: 'wake_ready', gate_state: 'wake_ready' };
}

/** True while the gate still watches processes and telemetry for this session. */
export function isAwaitingQuietWindow(session: GateSession): boolean {
  return session.idle_seen_at !== null && !SETTLED_GATE_STATES.has(session.gate_state);
}
