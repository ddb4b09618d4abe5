import { WorkflowIdReusePolicy } from '@temporalio/common';
import { workflowIdForRun } from '../domain/run-state.ts';
import { cycleWorkflowId } from '../domain/research-cycle.ts';
import type { CycleWorkflowInput } from './cycle-messages.ts';
import { PROJECT_ID_ATTRIBUTE, QUEUE_STATUS_ATTRIBUTE, type RunWorkflowInput } from './messages.ts';
import { paperWorkflowId, rewriteBatchWorkflowId, type PaperWorkflowInput, type RewriteBatchInput } from './paper-messages.ts';

/**
 * How each workflow type is started, in one place for the client and for a parent workflow alike (README "Runs",
 * Temporal UI): the id, the task timeout, the search attributes and the summary an operator reads in the Temporal
 * UI's list. A run that a research cycle starts as its child is then the same as one dispatch-next starts. Each
 * caller adds only what is its own: the task queue and conflict policy (client), the parent close policy (parent).
 */

/**
 * A workflow task whose worker died is handed out again after this (Temporal's default is 10 s), so a run interrupted
 * by a crash moves on within seconds of the worker being back (README "Runs", crash recovery). The tasks take
 * milliseconds, and the SDK extends a task while a ledger step (a local activity) is still running.
 */
const WORKFLOW_TASK_TIMEOUT = '4 seconds';

export function runStartOptions(input: RunWorkflowInput) {
  return {
    workflowId: workflowIdForRun(input.run_id),
    args: [input] as [RunWorkflowInput],
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    // A run id is started once: a second start of it fails, whatever its state.
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    typedSearchAttributes: [
      { key: PROJECT_ID_ATTRIBUTE, value: input.project_id },
      { key: QUEUE_STATUS_ATTRIBUTE, value: 'queued' },
    ],
    staticSummary: `run of ${input.project_id} on ${input.lane}, dispatched by ${input.requested_by}`,
    staticDetails: [`run ${input.run_id}`, `project ${input.project_id}`, `lane ${input.lane}`, `dispatched by ${input.requested_by}`, `agent ${input.agent.mode}${input.agent.model ? `, model ${input.agent.model}` : ''}`].join('\n'),
  };
}

export function paperStartOptions(input: PaperWorkflowInput) {
  return {
    workflowId: paperWorkflowId(input.paper_id),
    args: [input] as [PaperWorkflowInput],
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    // One step of a paper at a time; a finished step's id is reused by the paper's next one.
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
    typedSearchAttributes: [{ key: PROJECT_ID_ATTRIBUTE, value: input.project_id }],
    staticSummary: `${input.purpose} of paper ${input.paper_id}, requested by ${input.requested_by}`,
  };
}

export function cycleStartOptions(input: CycleWorkflowInput) {
  return {
    workflowId: cycleWorkflowId(input.cycle_id),
    args: [input] as [CycleWorkflowInput],
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    // A cycle's key names it for good: the same key never starts a second cycle, it finds the first.
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    staticSummary: `research cycle ${input.cycle_id}, requested by ${input.requested_by}`,
  };
}

export function rewriteBatchStartOptions(input: RewriteBatchInput) {
  return {
    workflowId: rewriteBatchWorkflowId(input.request_key),
    args: [input] as [RewriteBatchInput],
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    // The batch of a key runs once: the same key finds it (or its result).
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    staticSummary: `rewrite of ${input.papers.length} paper(s), requested by ${input.requested_by}`,
  };
}
