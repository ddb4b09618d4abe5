import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { readFlags } from '../runs/queue-flags.ts';
import { nextFollowupParent } from '../research/followup-parents.ts';
import type { Store } from '../../platform/store/store.ts';
import type { PumpStep } from '../../workflows/automation/schedule-messages.ts';
import { CommandRefusedError, refusalMessage } from '../../platform/command-errors.ts';
import { dispatchNext, selectDispatch, type DispatchSelection } from '../runs/dispatch.ts';
import type { DispatchSettings } from '../runs/dispatch-settings.ts';
import { launchNextFollowup } from '../research/followups.ts';
import { selectDraftCandidates, type PaperDrafting } from '../papers/paper-drafting.ts';
import { draftNextNoopReason } from '../papers/domain/paper-steps.ts';
import type { DraftNextInput } from '../../workflows/papers/paper-messages.ts';
import type { PaperLauncher } from '../papers/paper-launcher.ts';
import type { PaperSettings } from '../papers/paper-settings.ts';
import { sweepClosedPaperSteps } from '../papers/paper-step-sweep.ts';
import type { ResearchFacility } from '../research/research-facility.ts';
import type { RunLauncher } from '../runs/run-launcher.ts';

/**
 * The steps of one queue pump tick (docs/automation.md#queue-pump): a gate (nothing at all while the queue is paused or in
 * maintenance), then a dispatch when live dispatch is on, a follow-up launch and a draft-next when config lets the
 * pump do them. The tick's workflow starts the run and the draft-next as its children from what these steps select.
 * Every step that did something, or failed, is an audit event of the tick; a tick that finds nothing to do leaves no
 * trace but its workflow.
 */

export interface PumpDeps {
  store: Store;
  dispatch: DispatchSettings;
  runs: RunLauncher;
  facility: ResearchFacility;
  papers: { settings: PaperSettings; launcher: PaperLauncher };
  /** Drafting papers, as the composition root built it. */
  paperDrafting: PaperDrafting;
  /** queue_pump_enabled, queue_pump_followup_launch_enabled and queue_pump_paper_draft_enabled of this process. */
  pump: { enabled: boolean; followupLaunch: boolean; paperDraft: boolean };
}

export const QUEUE_PUMP_ACTOR = 'queue-pump';

const failure = (step: PumpStep['step'], error: unknown): PumpStep => {
  if (!(error instanceof CommandRefusedError)) throw error;
  return { step, action: 'failed', reason: refusalMessage(error), status: error.status };
};

async function audited(store: Store, tickId: string, step: PumpStep, acted: boolean): Promise<PumpStep> {
  if (acted || step.action === 'failed') {
    await appendAuditEvent(store, {
      entity_type: 'queue_pump',
      entity_id: tickId,
      event_type: `queue_pump.${step.step}`,
      payload: { ...step },
      idempotency_key: `${tickId}:${step.step}`,
      actor: QUEUE_PUMP_ACTOR,
    });
  }
  return step;
}

/**
 * Each step asks the config of the worker running it again: a step scheduled by a tick that passed its gate before a
 * restart turned the pump off is retried on the restarted worker, and must not act there.
 */
const pumpOff = (step: PumpStep['step']): PumpStep => ({ step, action: 'skipped', reason: 'queue_pump_enabled is false' });

/**
 * Whether this tick may act. The config of the worker running the tick decides, not the schedule's state: a tick the
 * schedule started before a restart that turned the pump off must not act after it.
 */
export async function pumpGate(deps: Pick<PumpDeps, 'store' | 'pump'>): Promise<PumpStep> {
  if (!deps.pump.enabled) return { ...pumpOff('gate'), action: 'closed' };
  const flags = await readFlags(deps.store);
  if (flags.maintenance_mode) return { step: 'gate', action: 'closed', reason: 'maintenance mode is on' };
  if (flags.queue_paused) return { step: 'gate', action: 'closed', reason: 'the queue is paused' };
  return { step: 'gate', action: 'open', reason: 'neither paused nor in maintenance' };
}

/** What the dispatch step starts, as the tick's child (workflows/automation/queue-pump-workflow.ts), or the step when it starts nothing. */
export async function pumpSelectDispatch(deps: PumpDeps): Promise<DispatchSelection | PumpStep> {
  if (!deps.pump.enabled) return pumpOff('dispatch');
  if (!deps.dispatch.liveDispatchEnabled) return { step: 'dispatch', action: 'skipped', reason: 'live dispatch is disabled (live_dispatch_enabled is false)' };
  return selectDispatch({ store: deps.store, settings: deps.dispatch }, { requested_by: QUEUE_PUMP_ACTOR, dry_run: false });
}

/**
 * Whether the paper step starts a draft-next now: with drafting on for the pump and a candidate waiting. A tick with
 * nothing to draft starts no workflow, and leaves no trace.
 */
export async function pumpPlanPaperDraft(deps: PumpDeps): Promise<{ start: DraftNextInput } | { step: PumpStep }> {
  if (!deps.pump.enabled) return { step: pumpOff('paper_draft') };
  if (!deps.pump.paperDraft) return { step: { step: 'paper_draft', action: 'skipped', reason: 'queue_pump_paper_draft_enabled is false' } };
  const { candidates, looked_at } = await selectDraftCandidates({ store: deps.store, settings: deps.papers.settings }, false, 1);
  if (candidates.length === 0) return { step: { step: 'paper_draft', action: 'noop', reason: draftNextNoopReason(looked_at, false) } };
  return { start: { requested_by: QUEUE_PUMP_ACTOR, force: false, request_key: null } };
}

/**
 * Gives back the papers held by a step whose workflow closed without finishing it, or held by no step at all
 * (capabilities/papers/paper-step-sweep.ts); a tick that swept none leaves no trace.
 */
export async function pumpSweepPaperSteps(deps: PumpDeps, tickId: string): Promise<PumpStep> {
  if (!deps.pump.enabled) return pumpOff('paper_sweep');
  const swept = await sweepClosedPaperSteps({ store: deps.store, launcher: deps.papers.launcher });
  if (swept.length === 0) return { step: 'paper_sweep', action: 'noop', reason: 'no generating paper is held by a step whose workflow has closed, or by no step' };
  const reason = `gave back ${swept.length} paper(s) held by a step whose workflow closed without finishing it, or by no step`;
  return audited(deps.store, tickId, { step: 'paper_sweep', action: 'swept', reason, papers: swept }, true);
}

/** The audit event of a step that acted or failed, once per tick and step. */
export const pumpRecordStep = (deps: Pick<PumpDeps, 'store'>, tickId: string, step: PumpStep): Promise<PumpStep> => audited(deps.store, tickId, step, true);

/** The dispatch step of ticks started before the child-workflows patch (workflows/patches.ts). */
export async function pumpDispatch(deps: PumpDeps, tickId: string): Promise<PumpStep> {
  if (!deps.pump.enabled) return pumpOff('dispatch');
  if (!deps.dispatch.liveDispatchEnabled) return { step: 'dispatch', action: 'skipped', reason: 'live dispatch is disabled (live_dispatch_enabled is false)' };
  let step: PumpStep;
  try {
    // Keyed by the tick: a retried step (its worker died while it waited) attaches to the run it started, if any,
    // instead of dispatching a second item.
    const answer = await dispatchNext(
      { store: deps.store, settings: deps.dispatch, runs: deps.runs },
      { dry_run: false, requested_by: QUEUE_PUMP_ACTOR, force_preflight: false, idempotency_key: `${tickId}:dispatch` },
    );
    step = { step: 'dispatch', action: answer.action, reason: answer.reason, ...('run_id' in answer ? { run_id: answer.run_id } : {}) };
  } catch (error) {
    step = failure('dispatch', error);
  }
  return audited(deps.store, tickId, step, step.action === 'live_dispatch' || step.action === 'dispatch_blocked');
}

export async function pumpFollowup(deps: PumpDeps, tickId: string): Promise<PumpStep> {
  if (!deps.pump.enabled) return pumpOff('followup');
  if (!deps.pump.followupLaunch) return { step: 'followup', action: 'skipped', reason: 'queue_pump_followup_launch_enabled is false' };
  // Looked at first: a tick with no parent waiting leaves no idempotency key behind (ticks run every minute).
  if (!(await nextFollowupParent(deps.store, { lock: false }))) {
    return { step: 'followup', action: 'noop', reason: 'no completed run with a negative or inconclusive decision and no paper is waiting for a follow-up' };
  }
  let step: PumpStep;
  try {
    const answer = await launchNextFollowup({ store: deps.store, facility: deps.facility }, { dry_run: false, requested_by: QUEUE_PUMP_ACTOR, idempotency_key: `${tickId}:followup` });
    step = { step: 'followup', action: answer.action, reason: answer.reason, ...(answer.parent_run ? { parent_run_id: answer.parent_run.run_id } : {}) };
  } catch (error) {
    step = failure('followup', error);
  }
  return audited(deps.store, tickId, step, step.action !== 'noop');
}

/** The paper step of ticks started before the child-workflows patch: it waited for the draft. */
export async function pumpPaperDraft(deps: PumpDeps, tickId: string): Promise<PumpStep> {
  if (!deps.pump.enabled) return pumpOff('paper_draft');
  if (!deps.pump.paperDraft) return { step: 'paper_draft', action: 'skipped', reason: 'queue_pump_paper_draft_enabled is false' };
  let step: PumpStep;
  try {
    const answer = (await deps.paperDrafting.draftNext({ dry_run: false, requested_by: QUEUE_PUMP_ACTOR, force: false })) as Record<string, unknown> & { action: string };
    step = { step: 'paper_draft', action: answer.action, reason: typeof answer.reason === 'string' ? answer.reason : answer.action, ...(typeof answer.paper_id === 'string' ? { paper_id: answer.paper_id } : {}) };
  } catch (error) {
    step = failure('paper_draft', error);
  }
  return audited(deps.store, tickId, step, step.action !== 'noop');
}
