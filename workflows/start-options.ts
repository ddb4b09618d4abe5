import { WorkflowIdReusePolicy } from '@temporalio/common';
import { workflowIdForRun } from '../capabilities/runs/domain/run-state.ts';
import { cycleWorkflowId } from '../capabilities/automation/domain/cycle-policy.ts';
import type { CycleWorkflowInput } from './automation/cycle-messages.ts';
import { CYCLE_ID_ATTRIBUTE, PAPER_ID_ATTRIBUTE, PROJECT_ID_ATTRIBUTE, QUEUE_STATUS_ATTRIBUTE, type RunWorkflowInput } from './runs/run-messages.ts';
import { paperWorkflowId, rewriteBatchWorkflowId, type DraftNextInput, type PaperWorkflowInput, type RewriteBatchInput } from './papers/paper-messages.ts';

/**
 * How each workflow type is started, in one place for the client and for a parent workflow alike (docs/runs.md#runs,
 * Temporal UI): the id, the task timeout, the search attributes and the summary an operator reads in the Temporal
 * UI's list. A run that a research cycle starts as its child is then the same as one dispatch-next starts. Each
 * caller adds only what is its own: the task queue and conflict policy (client), the parent close policy (parent).
 */

/**
 * A workflow task whose worker died is handed out again after this (Temporal's default is 10 s), so a run interrupted
 * by a crash moves on within seconds of the worker being back (docs/runs.md#runs, crash recovery). The tasks take
 * milliseconds, and the SDK extends a task while a ledger step (a local activity) is still running.
 */
const WORKFLOW_TASK_TIMEOUT = '4 seconds';

/** Details are Temporal markdown, which joins plain lines into one: each fact is an item of a list. */
const markdownList = (lines: string[]) => lines.map((line) => `- ${line}`).join('\n');

/** A child of a research cycle carries the cycle's id, so filtering on `cycle_id` lists the cycle and all it started. */
export interface StartedBy {
  cycle_id?: string;
}

const cycleAttribute = (startedBy: StartedBy) => (startedBy.cycle_id ? [{ key: CYCLE_ID_ATTRIBUTE, value: startedBy.cycle_id }] : []);

export function runStartOptions(input: RunWorkflowInput, startedBy: StartedBy = {}) {
  return {
    workflowId: workflowIdForRun(input.run_id),
    args: [input] as [RunWorkflowInput],
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    // A run id is started once: a second start of it fails, whatever its state.
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    typedSearchAttributes: [
      { key: PROJECT_ID_ATTRIBUTE, value: input.project_id },
      { key: QUEUE_STATUS_ATTRIBUTE, value: 'queued' },
      ...cycleAttribute(startedBy),
    ],
    staticSummary: `run of ${input.project_id} on ${input.lane}, dispatched by ${input.requested_by}`,
    staticDetails: markdownList([`run ${input.run_id}`, `project ${input.project_id}`, `lane ${input.lane}`, `dispatched by ${input.requested_by}`, `agent ${input.agent.mode}${input.agent.model ? `, model ${input.agent.model}` : ''}`]),
  };
}

export function paperStartOptions(input: PaperWorkflowInput) {
  return {
    workflowId: paperWorkflowId(input.paper_id),
    args: [input] as [PaperWorkflowInput],
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    // One step of a paper at a time; a finished step's id is reused by the paper's next one.
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
    typedSearchAttributes: [
      { key: PROJECT_ID_ATTRIBUTE, value: input.project_id },
      { key: PAPER_ID_ATTRIBUTE, value: input.paper_id },
    ],
    staticSummary: `${input.purpose} of paper ${input.paper_id}, requested by ${input.requested_by}`,
    staticDetails: markdownList([`paper ${input.paper_id}`, `project ${input.project_id}`, `from run ${input.run_id}`, `requested by ${input.requested_by}`]),
  };
}

export function cycleStartOptions(input: CycleWorkflowInput) {
  return {
    workflowId: cycleWorkflowId(input.cycle_id),
    args: [input] as [CycleWorkflowInput],
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    // A cycle's key names it for good: the same key never starts a second cycle, it finds the first.
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    typedSearchAttributes: [{ key: CYCLE_ID_ATTRIBUTE, value: input.cycle_id }],
    staticSummary: `research cycle ${input.cycle_id}, requested by ${input.requested_by}`,
    staticDetails: cyclePolicyDetails(input),
  };
}

/** What the cycle may do, as the Temporal UI shows it under the summary. */
function cyclePolicyDetails({ policy }: CycleWorkflowInput): string {
  const at = (limit: number) => (limit === 0 ? 'no' : `at most ${limit}`);
  return markdownList([
    `${at(policy.max_provider_requests_per_run)} provider request, ${at(policy.max_promotions_per_run)} promotion, ${at(policy.max_dispatches_per_run)} dispatch${policy.wait_for_completion ? ' (awaited)' : ''}`,
    `${at(policy.max_paper_drafts_per_run)} paper draft, ${at(policy.max_publication_rewrites_per_run)} rewrite(s)`,
    `admits at ≥ ${policy.min_admission_score}; stops if ${[policy.require_budget_ok && 'the budget blocks', policy.stop_if_queue_active && 'the queue is active', policy.stop_if_dashboard_attention && 'items wait for a person'].filter(Boolean).join(', ') || 'nothing'}`,
  ]);
}

export function rewriteBatchStartOptions(input: RewriteBatchInput, startedBy: StartedBy = {}) {
  return {
    workflowId: rewriteBatchWorkflowId(input.request_key),
    args: [input] as [RewriteBatchInput],
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    // The batch of a key runs once: the same key finds it (or its result).
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    typedSearchAttributes: cycleAttribute(startedBy),
    staticSummary: `rewrite of ${input.papers.length} paper(s), requested by ${input.requested_by}`,
  };
}

/** `workflowId`: from draftNextWorkflowId, named by who runs the draft-next. */
export function draftNextStartOptions(input: DraftNextInput, workflowId: string, startedBy: StartedBy = {}) {
  return {
    workflowId,
    args: [input] as [DraftNextInput],
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    // The queue pump runs one draft-next at a time under one id, a new one once the last has finished.
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
    typedSearchAttributes: cycleAttribute(startedBy),
    staticSummary: `draft-next${input.force ? ' (redrafts allowed)' : ''}, requested by ${input.requested_by}`,
  };
}
