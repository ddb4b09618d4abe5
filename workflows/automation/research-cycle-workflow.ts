import { ChildWorkflowFailure } from '@temporalio/common';
import { CancellationScope, executeChild, isCancellation, ParentClosePolicy, patched, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { CycleActivities } from '../../activities/automation/cycle-activities.ts';
import { skippedStage, type CycleStage } from '../../capabilities/automation/domain/cycle-policy.ts';
import { cycleStagesQuery, type CycleReport, type CycleWorkflowInput } from './cycle-messages.ts';
import { draftNextOwner, draftNextWorkflowId, type DraftNextResult, type RewriteBatchResult } from '../papers/paper-messages.ts';
import { paperDraftNextWorkflow } from '../papers/draft-next-workflow.ts';
import { paperRewriteBatchWorkflow } from '../papers/rewrite-batch-workflow.ts';
import { CYCLE_PATCHES } from '../patches.ts';
import { startRunChild } from '../runs/run-child.ts';
import { draftNextStartOptions, rewriteBatchStartOptions } from '../start-options.ts';

/**
 * A bounded research cycle (docs/automation.md#research-cycles): stop conditions, provider batch, promotion, dispatch (the run
 * workflow as a child, awaited when the policy says so), paper draft (a draft-next as a child) and publication rewrite
 * (a rewrite batch as a child), in that order, each at most once and each bounded by the policy. Every stage is an
 * activity or a child named after it, so the cycle's steps read in order in the Temporal UI, each child linked from
 * it; the result is the per-stage report.
 */

const quick = proxyActivities<Pick<CycleActivities, 'cycleStopConditions' | 'cyclePromote' | 'cycleSelectDispatch' | 'cycleSelectRewrites'>>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 5, initialInterval: '1 second' },
});

/** Stages that wait on a provider (and, in cycles started before the child-workflows patch, on paper workflows). */
const long = proxyActivities<Pick<CycleActivities, 'cycleProviderBatch' | 'cyclePaperDraft' | 'cyclePublicationRewrite'>>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { maximumAttempts: 3, initialInterval: '2 seconds' },
});

export async function researchCycleWorkflow(input: CycleWorkflowInput): Promise<CycleReport> {
  const { policy } = input;
  const startedBy = { cycle_id: input.cycle_id };
  const stages: CycleStage[] = [];
  setHandler(cycleStagesQuery, () => [...stages]);
  const report = (blocked: boolean, reason: string): CycleReport => ({
    ok: !blocked,
    action: blocked ? 'research_cycle_blocked' : 'research_cycle',
    dry_run: false,
    reason,
    run_cycle_id: input.cycle_id,
    workflow_id: workflowInfo().workflowId,
    stages,
  });

  const { stopped, ...stops } = await quick.cycleStopConditions(input);
  stages.push(stops);
  if (stopped) return report(true, stops.reason);

  stages.push(await long.cycleProviderBatch(input));
  stages.push(await quick.cyclePromote(input));
  stages.push(policy.max_dispatches_per_run === 0 ? skippedStage('dispatch', 'max_dispatches_per_run') : await dispatch());
  if (patched(CYCLE_PATCHES.childWorkflows)) {
    stages.push(policy.max_paper_drafts_per_run === 0 ? skippedStage('paper_draft', 'max_paper_drafts_per_run') : await paperDraft());
    stages.push(policy.max_publication_rewrites_per_run === 0 ? skippedStage('publication_rewrite', 'max_publication_rewrites_per_run') : await publicationRewrite());
  } else {
    stages.push(await long.cyclePaperDraft(input));
    stages.push(await long.cyclePublicationRewrite(input));
  }
  return report(false, `${stages.filter((stage) => !['skipped', 'noop'].includes(stage.action)).length} stage(s) acted`);

  async function dispatch(): Promise<CycleStage> {
    const selection = await quick.cycleSelectDispatch(input);
    if (selection.action !== 'start') return { name: 'dispatch', action: selection.action, reason: selection.reason };
    const runId = selection.input.run_id;
    const child = await startRunChild(selection.input, startedBy);
    if (!child.started) return { name: 'dispatch', action: 'dispatch_blocked', reason: child.reason };
    const started = { run_id: runId, workflow_id: child.handle.workflowId, candidate: selection.candidate, dispatch_route: selection.dispatch_route };
    if (!policy.wait_for_completion) return { name: 'dispatch', action: 'dispatch_started', reason: selection.reason, ...started };
    const result = await child.handle.result();
    return {
      name: 'dispatch',
      action: result.dispatch.action === 'live_dispatch' ? 'run_finished' : result.dispatch.action,
      reason: result.dispatch.action === 'live_dispatch' ? `run ${runId} finished: ${result.run_state}` : result.dispatch.reason,
      ...started,
      run_state: result.run_state,
      queue_status: result.queue_status,
    };
  }

  /** At most one paper (interface rule 2): one draft-next, waited for. */
  async function paperDraft(): Promise<CycleStage> {
    const workflowId = draftNextWorkflowId(draftNextOwner.researchCycle(input.cycle_id));
    let result: DraftNextResult;
    try {
      result = await executeChild(paperDraftNextWorkflow, {
        ...draftNextStartOptions({ requested_by: input.requested_by, force: false, request_key: `${input.cycle_id}:paper_draft` }, workflowId, startedBy),
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      });
    } catch (error) {
      return childFailed('paper_draft', workflowId, error);
    }
    if (result.action === 'noop') return { name: 'paper_draft', action: 'noop', reason: result.reason, skipped: result.skipped.length };
    if (result.action === 'failed') return { name: 'paper_draft', action: 'failed', reason: `drafting '${result.paper_id}' failed: ${result.error}`, paper_id: result.paper_id, workflow_id: workflowId };
    if (result.action === 'held_for_review') return { name: 'paper_draft', action: 'held_for_review', reason: result.reason, paper_id: result.paper_id, workflow_id: workflowId };
    return { name: 'paper_draft', action: 'drafted', reason: `drafted paper ${result.paper_id}`, paper_id: result.paper_id, paper_status: result.result.paper_status, workflow_id: workflowId };
  }

  async function publicationRewrite(): Promise<CycleStage> {
    const papers = await quick.cycleSelectRewrites(input);
    if (papers.length === 0) return { name: 'publication_rewrite', action: 'noop', reason: '0 paper(s) selected for a rewrite', count: 0 };
    const options = rewriteBatchStartOptions({ papers, requested_by: input.requested_by, request_key: `${input.cycle_id}:rewrite` }, startedBy);
    let batch: RewriteBatchResult;
    try {
      batch = await executeChild(paperRewriteBatchWorkflow, { ...options, parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL });
    } catch (error) {
      return childFailed('publication_rewrite', options.workflowId, error);
    }
    const rewritten = batch.results.filter((result) => result.outcome === 'drafted').length;
    return { name: 'publication_rewrite', action: 'rewritten', reason: `${rewritten} of ${papers.length} paper(s) rewritten`, count: papers.length, workflow_id: options.workflowId };
  }
}

/**
 * A child that failed as a workflow (not an outcome it reported): the stage says so, and the cycle goes on. A child
 * canceled with the cycle itself ends the cycle canceled.
 */
function childFailed(name: CycleStage['name'], workflowId: string, error: unknown): CycleStage {
  if (isCancellation(error) && CancellationScope.current().consideredCancelled && patched(CYCLE_PATCHES.cancellation)) throw error;
  if (!(error instanceof ChildWorkflowFailure)) throw error;
  return { name, action: 'failed', reason: `workflow ${workflowId} failed: ${error.cause?.message ?? error.message}`, workflow_id: workflowId };
}
