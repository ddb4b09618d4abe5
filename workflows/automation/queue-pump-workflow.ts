import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { ParentClosePolicy, patched, proxyActivities, startChild, workflowInfo } from '@temporalio/workflow';
import type { PumpActivities } from '../../activities/automation/pump-activities.ts';
import { draftNextOwner, draftNextWorkflowId } from '../papers/paper-messages.ts';
import { paperDraftNextWorkflow } from '../papers/draft-next-workflow.ts';
import { PUMP_PATCHES } from '../patches.ts';
import { startRunChild } from '../runs/run-child.ts';
import type { PumpStep, PumpTickReport } from './schedule-messages.ts';
import { draftNextStartOptions } from '../start-options.ts';

/**
 * One tick of the queue pump (docs/automation.md#queue-pump), started by its Temporal Schedule: nothing while the queue is
 * paused or in maintenance; else a dispatch (the run as the tick's child), then a follow-up launch, the sweep of paper
 * steps whose workflow closed without finishing them, and a draft-next (a child the tick does not wait for) when config
 * lets the pump do them. Each step is an activity or a child of its
 * own, so a tick reads step by step in the Temporal UI, linked to the run and the draft-next it started.
 */

const pump = proxyActivities<PumpActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  // A tick that fails is not retried at length: the next tick is only an interval away.
  retry: { maximumAttempts: 2, initialInterval: '2 seconds' },
});

export async function queuePumpWorkflow(): Promise<PumpTickReport> {
  const tickId = workflowInfo().workflowId;
  const gate = await pump.pumpGate();
  if (gate.action !== 'open') return { tick_id: tickId, steps: [gate] };
  if (!patched(PUMP_PATCHES.childWorkflows)) {
    const steps = [gate, await pump.pumpDispatch(tickId), await pump.pumpFollowup(tickId), await pump.pumpPaperDraft(tickId)];
    return { tick_id: tickId, steps };
  }
  const steps = [gate, await dispatch(tickId), await pump.pumpFollowup(tickId)];
  // A paper given back by the sweep may be drafted by this very tick.
  if (patched(PUMP_PATCHES.paperStepSweep)) steps.push(await pump.pumpSweepPaperSteps(tickId));
  steps.push(await paperDraft(tickId));
  return { tick_id: tickId, steps };
}

/** At most one run per tick: the start is a command of the tick's history, which no retry or replay repeats. */
async function dispatch(tickId: string): Promise<PumpStep> {
  const selection = await pump.pumpSelectDispatch();
  if ('step' in selection) return selection;
  if (selection.action !== 'start') {
    const step: PumpStep = { step: 'dispatch', action: selection.action, reason: selection.reason };
    return selection.action === 'dispatch_blocked' ? pump.pumpRecordStep(tickId, step) : step;
  }
  const child = await startRunChild(selection.input);
  const step: PumpStep = child.started
    ? { step: 'dispatch', action: 'dispatch_started', reason: selection.reason, run_id: selection.input.run_id, workflow_id: child.handle.workflowId }
    : { step: 'dispatch', action: 'dispatch_blocked', reason: child.reason };
  return pump.pumpRecordStep(tickId, step);
}

/**
 * The pump's draft-next runs apart from its ticks, one at a time under one id: a slow writer holds neither the tick
 * nor the idle lanes the next ticks dispatch to.
 */
async function paperDraft(tickId: string): Promise<PumpStep> {
  const plan = await pump.pumpPlanPaperDraft();
  if ('step' in plan) return plan.step;
  const workflowId = draftNextWorkflowId(draftNextOwner.queuePump(workflowInfo().taskQueue));
  try {
    await startChild(paperDraftNextWorkflow, {
      ...draftNextStartOptions(plan.start, workflowId),
      // The draft goes on after the tick that started it has closed.
      parentClosePolicy: ParentClosePolicy.ABANDON,
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return { step: 'paper_draft', action: 'in_progress', reason: `the draft-next an earlier tick started (workflow ${workflowId}) is still running` };
  }
  return pump.pumpRecordStep(tickId, { step: 'paper_draft', action: 'draft_next_started', reason: 'a paper is waiting for a draft', workflow_id: workflowId });
}
