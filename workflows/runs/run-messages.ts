import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CallbackEventType, DispatchMode, GateState, ReasoningEffort } from '../../worker-gate/contract/gate-names.ts';
import type { PreflightResult } from '../../capabilities/runs/domain/preflight-checks.ts';
import type { RunEvidence } from '../../worker-gate/contract/callback-body.ts';
import type { AgentQuestion, AllowedTool } from '../../worker-gate/contract/agent-question.ts';

/** Messages of the run workflow, shared by the workflow, the worker and the HTTP layer (the client side). */

export const RUN_WORKFLOW_TYPE = 'runWorkflow';

/**
 * Custom search attributes, registered on the namespace at start-up (bin/search-attributes.ts), so an operator
 * filters the Temporal UI's list by them: `project_id` on every workflow of a project (runs, paper steps), a run's
 * `queue_status`, `paper_id` on paper steps, and `cycle_id` on a research cycle and on every workflow it started.
 */
export const PROJECT_ID_ATTRIBUTE = defineSearchAttributeKey('project_id', SearchAttributeType.KEYWORD);
export const QUEUE_STATUS_ATTRIBUTE = defineSearchAttributeKey('queue_status', SearchAttributeType.KEYWORD);
export const PAPER_ID_ATTRIBUTE = defineSearchAttributeKey('paper_id', SearchAttributeType.KEYWORD);
export const CYCLE_ID_ATTRIBUTE = defineSearchAttributeKey('cycle_id', SearchAttributeType.KEYWORD);
export const SEARCH_ATTRIBUTES = [PROJECT_ID_ATTRIBUTE, QUEUE_STATUS_ATTRIBUTE, PAPER_ID_ATTRIBUTE, CYCLE_ID_ATTRIBUTE] as const;

/** Durations are inputs so a test can run a whole run in seconds. */
export interface RunTimings {
  /** How long the run waits for a finishing callback once the worker accepted it (max_wait_after_idle_sec + margin). */
  completion_wait_sec: number;
  /** Time limit of one call to the gate (prepare or dispatch). */
  gate_call_timeout_sec: number;
  /** Tries of each gate call before the dispatch attempt counts as failed. */
  gate_call_attempts: number;
  /** First pause between tries; it doubles after each. */
  gate_retry_initial_sec: number;
  /**
   * How long a run whose agent asked a question waits for the operator's answer, keeping its lane, before it ends in
   * gate_timeout and its item goes to needs_review. Absent from runs started before answers existed.
   */
  question_wait_sec?: number;
}

export interface AgentSettings {
  mode: DispatchMode;
  model: string;
  reasoning_effort: ReasoningEffort;
  sandbox: string;
}

/** No secrets here: workflow inputs are visible in the Temporal UI. Activities look tokens up by lane. */
export interface RunWorkflowInput {
  run_id: string;
  project_id: string;
  /** The worker target (lane) the run was routed to. */
  lane: string;
  requested_by: string;
  agent: AgentSettings;
  timings: RunTimings;
}

/** What a live dispatch-next answers, once the worker accepted the run or the attempt failed. */
export type DispatchOutcome =
  | { action: 'live_dispatch'; run_id: string; workflow_id: string; prepare: Record<string, unknown>; dispatch: Record<string, unknown> }
  | { action: 'dispatch_blocked'; reason: string; preflight?: PreflightResult }
  | { action: 'dispatch_failed'; reason: string; stage: 'prepare' | 'dispatch'; status: number | null; queue_status: string | null }
  | { action: 'canceled'; reason: string };

/** The part of a worker callback the workflow acts on (the full body is kept in worker_callbacks). */
export interface RunCallback {
  idempotency_key: string;
  event_type: CallbackEventType;
  session_id: string | null;
  gate_state: GateState;
  reason: string;
  seen_at: string;
  question: string | null;
  /** With question_pending: the question's choices, or the tool call a permission request is for. Absent from older signals. */
  question_detail?: AgentQuestion | null;
  /**
   * With usage_limited: when the limit resets, as the tool said, and when the gate asks the run to resume (null when
   * its gate named no time). Absent from other callbacks.
   */
  usage_limit?: { resets_at: string | null; resumes_at: string | null; holds_slot?: boolean };
  evidence: RunEvidence | null;
}

/** An operator's request to resume a run waiting out a usage limit before its time (docs/runs.md#waiting-out-a-usage-limit). */
export interface ResumeNow {
  /** Which of the run's usage limits it is for: the n-th limit is n. */
  limit_number: number;
  requested_by: string;
}

/** An operator's answer to the agent, recorded in the ledger (run_answers), for the run to resume the session with. */
export interface RunAnswer {
  /** Its number within the run: the answer to the run's n-th question. */
  answer_number: number;
  prompt: string;
  allowed_tools: AllowedTool[];
}

/** Where a run is: the workflow's current details in the Temporal UI (workflows/runs/run-workflow.ts). */
export interface RunProgress {
  run_id: string;
  phase:
    | 'claiming'
    | 'preflight'
    | 'preparing'
    | 'dispatching'
    | 'awaiting_callbacks'
    | 'awaiting_answer'
    | 'awaiting_limit_reset'
    | 'retaking_lane'
    | 'resuming'
    | 'reconciling'
    | 'finished';
  run_state: string | null;
  queue_status: string | null;
  callbacks_seen: number;
  outcome: DispatchOutcome['action'] | null;
}

export interface RunWorkflowResult {
  run_id: string;
  /** How the dispatch phase ended (also what dispatchOutcomeUpdate answered). */
  dispatch: DispatchOutcome;
  run_state: string | null;
  queue_status: string | null;
}

export const workerCallbackSignal = defineSignal<[RunCallback]>('workerCallback');
/** The operator's answer to the agent's question; a repeated one (same answer_number) changes nothing. */
export const answerSignal = defineSignal<[RunAnswer]>('answer');
/** Resume a run waiting out a usage limit now; a repeated one (same limit_number) changes nothing. */
export const resumeNowSignal = defineSignal<[ResumeNow]>('resumeNow');
/** Answers once the dispatch phase has an outcome; the HTTP call of a live dispatch-next waits on it. */
export const dispatchOutcomeUpdate = defineUpdate<DispatchOutcome>('dispatchOutcome');
