import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { ParentClosePolicy, proxyActivities, setHandler, startChild, workflowInfo } from '@temporalio/workflow';
import { runStartOptions } from './start-options.ts';
import type { CycleActivities } from '../activities/research-cycle.ts';
import { skippedStage, type CycleStage } from '../domain/research-cycle.ts';
import { cycleStagesQuery, type CycleReport, type CycleWorkflowInput } from './cycle-messages.ts';
import { runWorkflow } from './run.ts';

/**
 * A bounded research cycle (README "Research cycles"): stop conditions, provider batch, promotion, dispatch (the run
 * workflow as a child, awaited when the policy says so), paper draft and publication rewrite, in that order, each at
 * most once and each bounded by the policy. Every stage is an activity named after it, so the cycle's steps read in
 * order in the Temporal UI; the result is the per-stage report.
 */

const quick = proxyActivities<Pick<CycleActivities, 'cycleStopConditions' | 'cyclePromote' | 'cycleSelectDispatch'>>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 5, initialInterval: '1 second' },
});

/** Stages that wait on a provider or on paper workflows; they heartbeat, so a dead worker is noticed in seconds. */
const long = proxyActivities<Pick<CycleActivities, 'cycleProviderBatch' | 'cyclePaperDraft' | 'cyclePublicationRewrite'>>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { maximumAttempts: 3, initialInterval: '2 seconds' },
});

export async function researchCycleWorkflow(input: CycleWorkflowInput): Promise<CycleReport> {
  const { policy } = input;
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
  stages.push(await long.cyclePaperDraft(input));
  stages.push(await long.cyclePublicationRewrite(input));
  return report(false, `${stages.filter((stage) => !['skipped', 'noop'].includes(stage.action)).length} stage(s) acted`);

  async function dispatch(): Promise<CycleStage> {
    const selection = await quick.cycleSelectDispatch(input);
    if (selection.action !== 'start') return { name: 'dispatch', action: selection.action, reason: selection.reason };
    const runId = selection.input.run_id;
    let child;
    try {
      child = await startChild(runWorkflow, {
        ...runStartOptions(selection.input),
        // The run is work of its own: it goes on (and can be canceled on its own) whatever happens to the cycle.
        parentClosePolicy: ParentClosePolicy.ABANDON,
      });
    } catch (error) {
      // run_id has one-second resolution: a dispatch-next that started the same id in the same second wins.
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      return { name: 'dispatch', action: 'dispatch_blocked', reason: `run ${runId} was already started by another dispatch` };
    }
    const started = { run_id: runId, workflow_id: child.workflowId, candidate: selection.candidate, dispatch_route: selection.dispatch_route };
    if (!policy.wait_for_completion) return { name: 'dispatch', action: 'dispatch_started', reason: selection.reason, ...started };
    const result = await child.result();
    return {
      name: 'dispatch',
      action: result.dispatch.action === 'live_dispatch' ? 'run_finished' : result.dispatch.action,
      reason: result.dispatch.action === 'live_dispatch' ? `run ${runId} finished: ${result.run_state}` : result.dispatch.reason,
      ...started,
      run_state: result.run_state,
      queue_status: result.queue_status,
    };
  }
}
