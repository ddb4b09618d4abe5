import type { CallbackEventType } from '../../../worker-gate/contract/gate-names.ts';
import type { QueueStatus } from './queue-status.ts';

/**
 * Run states and the transitions a run workflow applies (docs/runs.md#runs). Each transition moves the run row and the
 * item's queue row together, in one transaction, with one audit event. Pure.
 */

export const RUN_STATES = [
  'prepared',
  'dispatching',
  'awaiting_wake',
  'running',
  'question_pending',
  'usage_limited',
  'wake_ready',
  'session_finished_ready',
  'gate_timeout',
  'gate_error',
  'reconciled',
  'dispatch_error',
  'canceled',
] as const;
export type RunState = (typeof RUN_STATES)[number];

/**
 * States after which a run changes no more; callbacks for such a run are recorded and ignored. A run whose agent waits
 * on a question, or for the model's usage limit to reset, is not finished: its workflow waits for the answer or the
 * reset and resumes the session (docs/runs.md#answering-the-agent, docs/runs.md#waiting-out-a-usage-limit).
 */
export const FINISHED_RUN_STATES: ReadonlySet<RunState> = new Set([
  'gate_timeout',
  'gate_error',
  'reconciled',
  'dispatch_error',
  'canceled',
]);

export const isRunFinished = (state: RunState): boolean => FINISHED_RUN_STATES.has(state);

export const RUN_TRANSITIONS = [
  'prepared',
  'worker_accepted',
  'session_started',
  'continued',
  'question_pending',
  'question_asked',
  'answered',
  'question_unanswered',
  'resume_failed',
  'usage_limited',
  'limit_resumed',
  'wake_received',
  'reconciling',
  'completed',
  'gate_timeout',
  'gate_error',
  'completion_timeout',
  'dispatch_failed',
  'canceled',
] as const;
export type RunTransition = (typeof RUN_TRANSITIONS)[number];

export interface TransitionRule {
  /** Run states this transition may start from; any other state makes it a no-op. */
  from: readonly RunState[];
  /** The run's new state; null keeps the state (the wake state stays until reconciled). */
  runState: RunState | null;
  /** The queue row's new status; null leaves the queue row alone. */
  queueStatus: QueueStatus | null;
}

const BEFORE_WAKE: readonly RunState[] = ['awaiting_wake', 'running'];
const IN_FLIGHT: readonly RunState[] = ['prepared', 'dispatching', 'awaiting_wake', 'running', 'question_pending', 'usage_limited', 'wake_ready', 'session_finished_ready'];
const WAITING_ON_AN_ANSWER: readonly RunState[] = ['question_pending'];
const WAITING_TO_RESUME: readonly RunState[] = ['question_pending', 'usage_limited'];

export const TRANSITION_RULES: Readonly<Record<RunTransition, TransitionRule>> = {
  prepared: { from: ['dispatching'], runState: 'prepared', queueStatus: null },
  worker_accepted: { from: ['dispatching', 'prepared'], runState: 'awaiting_wake', queueStatus: 'awaiting_wake' },
  session_started: { from: ['awaiting_wake'], runState: 'running', queueStatus: 'running' },
  // The session ended without its evidence, and the gate resumed it: the run goes on as it was.
  continued: { from: BEFORE_WAKE, runState: null, queueStatus: null },
  // Runs started before answers existed: the question ends the run's wait, and its item waits for review.
  question_pending: { from: BEFORE_WAKE, runState: 'question_pending', queueStatus: 'needs_review' },
  // The agent asked: the run waits for the operator's answer and keeps its lane (its item stays in flight, flagged).
  question_asked: { from: BEFORE_WAKE, runState: 'question_pending', queueStatus: 'running' },
  // The answer reached the gate, which resumed the agent's session with it.
  answered: { from: WAITING_ON_AN_ANSWER, runState: 'running', queueStatus: 'running' },
  // No answer came within agent_question_wait_sec: the run ends, timed out, and its item waits for review (lane freed).
  question_unanswered: { from: WAITING_ON_AN_ANSWER, runState: 'gate_timeout', queueStatus: 'needs_review' },
  // The gate could not resume the session (with the answer, or after the usage limit).
  resume_failed: { from: WAITING_TO_RESUME, runState: 'gate_error', queueStatus: 'blocked' },
  // The model refused for a usage limit: the run waits for the reset, keeping its lane, then its session resumes. A long
  // wait lets the lane go: the store moves the item to usage_limited instead (capabilities/runs/run-ledger.ts).
  usage_limited: { from: BEFORE_WAKE, runState: 'usage_limited', queueStatus: 'running' },
  // The limit's wait ended (or an operator resumed the run early), and the gate resumed the session.
  limit_resumed: { from: ['usage_limited'], runState: 'running', queueStatus: 'running' },
  // runState is the callback's event type (wake_ready or session_finished_ready), given with the transition.
  wake_received: { from: BEFORE_WAKE, runState: null, queueStatus: 'wake_received' },
  reconciling: { from: ['wake_ready', 'session_finished_ready'], runState: null, queueStatus: 'reconciling' },
  completed: { from: ['wake_ready', 'session_finished_ready'], runState: 'reconciled', queueStatus: 'completed' },
  gate_timeout: { from: BEFORE_WAKE, runState: 'gate_timeout', queueStatus: 'blocked' },
  gate_error: { from: BEFORE_WAKE, runState: 'gate_error', queueStatus: 'blocked' },
  // No callback arrived within the run's wait: the workflow gives up and asks an operator to look.
  completion_timeout: { from: BEFORE_WAKE, runState: 'gate_timeout', queueStatus: 'blocked' },
  // queueStatus is queued, or dispatch_error on the third failure in a row (decided by the store).
  dispatch_failed: { from: ['dispatching', 'prepared'], runState: 'dispatch_error', queueStatus: 'queued' },
  canceled: { from: IN_FLIGHT, runState: 'canceled', queueStatus: 'canceled' },
};

/** Transitions after which the run's item waits for a person (manual_review_required set). */
export const FLAGGING_TRANSITIONS: ReadonlySet<RunTransition> = new Set(['question_pending', 'question_asked', 'question_unanswered']);

/** Consecutive failed dispatch attempts after which an item stops being retried (docs/runs.md#runs, step 3). */
export const MAX_CONSECUTIVE_DISPATCH_FAILURES = 3;

/** The transition a worker callback asks for. */
export const CALLBACK_TRANSITIONS: Readonly<Record<CallbackEventType, RunTransition>> = {
  session_started: 'session_started',
  session_continued: 'continued',
  question_pending: 'question_pending',
  usage_limited: 'usage_limited',
  wake_ready: 'wake_received',
  session_finished_ready: 'wake_received',
  gate_timeout: 'gate_timeout',
  gate_error: 'gate_error',
};

/** `<project_id>-<UTC yyyymmddThhmmssZ>` (docs/runs.md#runs). */
export function runIdFor(projectId: string, at: Date): string {
  const stamp = at.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  return `${projectId}-${stamp}`;
}

export const workflowIdForRun = (runId: string): string => `run:${runId}`;

/** How a decision file's outcome is recorded as `project → decision` lineage (known negatives read negative/mixed). */
export function decisionRelation(decision: string | null): string | null {
  if (decision === null) return null;
  const normalized = decision.trim().toLowerCase();
  if (normalized === '') return null;
  if (normalized.includes('negative')) return 'negative';
  if (normalized.includes('positive')) return 'positive';
  if (normalized === 'inconclusive' || normalized === 'mixed') return 'mixed';
  return 'other';
}
