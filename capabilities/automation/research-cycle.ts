import { queueItemLane } from '../console/domain/operator-lanes.ts';
import { budgetMatters, cycleStop, cycleWorkflowId, skippedStage, type CyclePolicy, type CycleStage } from './domain/cycle-policy.ts';
import type { CycleReport } from '../../workflows/automation/cycle-messages.ts';
import { CycleNotStartedError, type CycleLauncher } from './cycle-launcher.ts';
import { countActiveItems } from '../runs/dispatch-candidates.ts';
import { claimKey, completeKey, releaseKey, runIdempotent } from '../../platform/store/idempotency-keys.ts';
import { queueFactGroups } from '../console/overview-reads.ts';
import { nextPromotableCandidate } from '../research/research-candidates.ts';
import type { Store } from '../../platform/store/store.ts';
import { CommandRefusedError, keptRefusalError, refusalMessage } from '../../platform/command-errors.ts';
import { selectDispatch } from '../runs/dispatch.ts';
import type { DispatchSettings } from '../runs/dispatch-settings.ts';
import type { PaperDrafting } from '../papers/paper-drafting.ts';
import { generateProviderBatch, providerBudget, type ProviderBatchSettings } from '../research/provider-batch.ts';
import type { ResearchFacility } from '../research/research-facility.ts';

/**
 * The stages of a bounded research cycle (docs/automation.md#research-cycles), each as a dry run (what it would do, writing
 * nothing and spending nothing) or live. The run-cycle dry run calls them in order here; a live cycle is the
 * research-cycle workflow, whose activities call the same functions once each.
 */

export interface CycleDeps {
  store: Store;
  dispatch: DispatchSettings;
  facility: ResearchFacility;
  researchProvider: ProviderBatchSettings;
  /** Drafting papers, as the composition root built it. */
  paperDrafting: PaperDrafting;
}

export interface StageRequest {
  cycle_id: string;
  requested_by: string;
  dry_run: boolean;
}

/** Candidates a cycle asks the provider for in its one request. */
export const CYCLE_PROVIDER_COUNT = 2;


/** A stage refused by the service it calls (a 4xx/5xx of its own): reported, and the cycle goes on. */
const refusedStage = (name: CycleStage['name'], error: unknown): CycleStage => {
  if (!(error instanceof CommandRefusedError)) throw error;
  return { name, action: 'refused', reason: refusalMessage(error), status: error.status };
};

export async function stopConditionStage(deps: Pick<CycleDeps, 'store' | 'researchProvider'>, policy: CyclePolicy): Promise<CycleStage & { stopped: boolean }> {
  const [activeItems, groups, budget] = await Promise.all([
    countActiveItems(deps.store),
    queueFactGroups(deps.store),
    budgetMatters(policy) ? providerBudget({ store: deps.store, settings: deps.researchProvider }) : null,
  ]);
  const attentionItems = groups.filter((group) => queueItemLane(group) === 'attention').reduce((sum, group) => sum + group.n, 0);
  const stop = cycleStop(policy, { activeItems, attentionItems, budget });
  const facts = { active_items: activeItems, attention_items: attentionItems, budget_ok: budget?.ok ?? null };
  if (stop) return { name: 'stop_conditions', action: 'stopped', reason: stop.reason, condition: stop.condition, stopped: true, ...facts };
  return { name: 'stop_conditions', action: 'passed', reason: 'no stop condition holds', stopped: false, ...facts };
}

export async function providerStage(deps: CycleDeps, policy: CyclePolicy, request: StageRequest): Promise<CycleStage> {
  if (policy.max_provider_requests_per_run === 0) return skippedStage('provider_batch', 'max_provider_requests_per_run');
  try {
    const answer = await generateProviderBatch(
      { store: deps.store, facility: deps.facility, settings: deps.researchProvider },
      { dry_run: request.dry_run, requested_by: request.requested_by, count: CYCLE_PROVIDER_COUNT, idempotency_key: `${request.cycle_id}:provider` },
    );
    return {
      name: 'provider_batch',
      action: answer.action,
      reason: answer.reason,
      ...(answer.batch_id ? { batch_id: answer.batch_id, counts: answer.counts, invalid: answer.invalid?.length ?? 0 } : {}),
    };
  } catch (error) {
    return refusedStage('provider_batch', error);
  }
}

export async function promoteStage(deps: CycleDeps, policy: CyclePolicy, request: StageRequest): Promise<CycleStage> {
  if (policy.max_promotions_per_run === 0) return skippedStage('promote', 'max_promotions_per_run');
  const none: CycleStage = { name: 'promote', action: 'noop', reason: `no admitted candidate scoring at least ${policy.min_admission_score} waits for promotion` };
  try {
    if (request.dry_run) {
      const candidateId = await nextPromotableCandidate(deps.store, policy.min_admission_score, { lock: false });
      if (!candidateId) return none;
      const preview = await deps.facility.promoteCandidate({ candidate_id: candidateId, dry_run: true, requested_by: request.requested_by });
      return { name: 'promote', action: 'would_promote', reason: `would promote ${candidateId} into ${preview.project_id}`, candidate_id: candidateId, project_id: preview.project_id };
    }
    // One transaction, replayed by the cycle's key: a retried stage answers what the first attempt promoted.
    return await deps.store.transaction(async (tx) => {
      const { response } = await runIdempotent(tx, { scope: 'research.cycle.promote', key: request.cycle_id, payload: { min_admission_score: policy.min_admission_score } }, async () => {
        const candidateId = await nextPromotableCandidate(tx, policy.min_admission_score, { lock: true });
        if (!candidateId) return none;
        const promoted = await deps.facility.promoteWithin(tx, candidateId, request.requested_by, `${request.cycle_id}:promote`);
        return { name: 'promote', action: 'promoted', reason: `promoted ${candidateId} into ${promoted.project_id}`, candidate_id: candidateId, project_id: promoted.project_id } satisfies CycleStage;
      });
      return response;
    });
  } catch (error) {
    return refusedStage('promote', error);
  }
}

/** The dispatch stage of a dry run; live, the workflow starts the run workflow as its child from `selectDispatch`. */
export async function dispatchDryRunStage(deps: CycleDeps, policy: CyclePolicy, request: StageRequest): Promise<CycleStage> {
  if (policy.max_dispatches_per_run === 0) return skippedStage('dispatch', 'max_dispatches_per_run');
  const selection = await selectDispatch({ store: deps.store, settings: deps.dispatch }, { requested_by: request.requested_by, dry_run: true });
  if (selection.action !== 'start') return { name: 'dispatch', action: selection.action, reason: selection.reason };
  return {
    name: 'dispatch',
    action: 'would_dispatch',
    reason: `${selection.reason}${policy.wait_for_completion ? ', and wait for the run to finish' : ''}`,
    candidate: selection.candidate,
    dispatch_route: selection.dispatch_route,
  };
}

export async function paperDraftStage(deps: CycleDeps, policy: CyclePolicy, request: StageRequest): Promise<CycleStage> {
  if (policy.max_paper_drafts_per_run === 0) return skippedStage('paper_draft', 'max_paper_drafts_per_run');
  try {
    const answer = await deps.paperDrafting.draftNext({ dry_run: request.dry_run, requested_by: request.requested_by, force: false });
    const paperId = 'paper_id' in answer ? answer.paper_id : null;
    const reason = 'reason' in answer ? answer.reason : paperId ? `${answer.action} paper ${paperId}` : answer.action;
    return { name: 'paper_draft', action: answer.action, reason, ...(paperId ? { paper_id: paperId } : {}) };
  } catch (error) {
    return refusedStage('paper_draft', error);
  }
}

export async function publicationRewriteStage(deps: CycleDeps, policy: CyclePolicy, request: StageRequest): Promise<CycleStage> {
  if (policy.max_publication_rewrites_per_run === 0) return skippedStage('publication_rewrite', 'max_publication_rewrites_per_run');
  try {
    const answer = await deps.paperDrafting.rewriteBatch({
      limit: policy.max_publication_rewrites_per_run,
      dry_run: request.dry_run,
      requested_by: request.requested_by,
      idempotency_key: `${request.cycle_id}:rewrite`,
      force: false,
      skip_rewritten: true,
    });
    const count = answer.count;
    if (answer.dry_run) return { name: 'publication_rewrite', action: count > 0 ? 'would_rewrite' : 'noop', reason: `${count} paper(s) selected for a rewrite`, count };
    return { name: 'publication_rewrite', action: count > 0 ? 'rewritten' : 'noop', reason: `${answer.rewritten} of ${count} paper(s) rewritten`, count };
  } catch (error) {
    return refusedStage('publication_rewrite', error);
  }
}

/**
 * Runs a live stage at most once per cycle: the stage's outcome is kept under the cycle's key, so an activity retried
 * after a crash answers the first outcome; a stage whose earlier attempt stopped part-way is reported, not repeated.
 */
export async function onceForCycle(store: Store, cycleId: string, stage: CycleStage['name'], run: () => Promise<CycleStage>): Promise<CycleStage> {
  const scope = 'research.cycle.stage';
  const key = `${cycleId}:${stage}`;
  const claim = await claimKey<null, CycleStage>(store, { scope, key, payload: {} });
  if (claim.state === 'done') return claim.response;
  if (claim.state === 'pending') {
    return { name: stage, action: 'interrupted', reason: 'an earlier attempt of this stage stopped before it finished; it is not repeated' };
  }
  let result: CycleStage;
  try {
    result = await run();
  } catch (error) {
    await releaseKey(store, scope, key);
    throw error;
  }
  await completeKey(store, scope, key, { response: result, status_code: 200 });
  return result;
}

/** The whole cycle as a dry run: every stage says what it would do; nothing is written and no request is spent. */
export async function dryRunCycle(deps: CycleDeps, policy: CyclePolicy, request: Omit<StageRequest, 'dry_run'>) {
  const stage = { ...request, dry_run: true };
  const stops = await stopConditionStage(deps, policy);
  const { stopped, ...stopStage } = stops;
  const stages: CycleStage[] = [stopStage];
  if (!stopped) {
    stages.push(await providerStage(deps, policy, stage));
    stages.push(await promoteStage(deps, policy, stage));
    stages.push(await dispatchDryRunStage(deps, policy, stage));
    stages.push(await paperDraftStage(deps, policy, stage));
    stages.push(await publicationRewriteStage(deps, policy, stage));
  }
  return { ok: !stopped, reason: stopped ? stopStage.reason : 'every stage says what it would do', stages };
}

export interface RunCycleRequest extends CyclePolicy {
  dry_run: boolean;
  requested_by: string;
  idempotency_key?: string | undefined;
}

/**
 * `POST /control/api/research/run-cycle`: a dry run reports what each stage would do; a live call (enabled, with an
 * idempotency key) starts the cycle workflow named by its key and answers at once: the stages finished so far while
 * it runs (`research_cycle_running`), its report once it has finished. The same key and body answer where the same
 * cycle is now (`GET /control/api/research/cycles/{run_cycle_id}` answers the same); another body is 409. A waiting
 * cycle never holds a connection.
 */
export async function runCycle(deps: CycleDeps & { cycles: CycleLauncher }, request: RunCycleRequest) {
  const { dry_run: dryRun, requested_by: requestedBy, idempotency_key: key, ...policy } = request;
  if (dryRun) {
    const result = await dryRunCycle(deps, policy, { cycle_id: key ?? 'dry-run', requested_by: requestedBy });
    return { ...result, action: 'dry_run_research_cycle' as const, dry_run: true, run_cycle_id: key ?? null, workflow_id: key ? cycleWorkflowId(key) : null };
  }
  if (!policy.enabled) throw new CommandRefusedError(409, 'live run-cycle requires enabled=true');
  if (deps.store.readOnly) throw new CommandRefusedError(501, 'the store is read-only (control_plane_store_backend is pg_readonly)');
  if (!key) throw new CommandRefusedError(422, [{ loc: ['body', 'idempotency_key'], msg: 'is required for a live run-cycle', type: 'missing' }]);
  const scope = 'research.run-cycle';
  const claim = await claimKey(deps.store, { scope, key, payload: { policy, requested_by: requestedBy } });
  // A claim still pending is a first call that died between claiming and starting, or one starting right now: the
  // start is idempotent (the key names the workflow), so this call starts it, or finds it started.
  if (claim.state !== 'done') {
    try {
      await deps.cycles.startCycle({ cycle_id: key, requested_by: requestedBy, policy });
    } catch (error) {
      const detail = { message: `the research cycle ${cycleWorkflowId(key)} did not start: ${error instanceof Error ? error.message : String(error)}`, workflow_id: cycleWorkflowId(key) };
      // Nothing started: the same call may be sent again.
      if (error instanceof CycleNotStartedError && claim.state === 'claimed') await releaseKey(deps.store, scope, key);
      throw new CommandRefusedError(502, detail);
    }
    await completeKey(deps.store, scope, key, { response: { workflow_id: cycleWorkflowId(key) }, status_code: 200 });
  } else if (claim.status_code !== 200) {
    // A key an earlier version settled with a refusal keeps it.
    throw keptRefusalError(claim);
  }
  const answer = await cycleAnswer(deps.cycles, key);
  if (answer) return answer;
  // The workflow is past Temporal's retention; a key an earlier version settled kept the report itself.
  const kept = claim.state === 'done' ? (claim.response as Partial<CycleReport>) : null;
  if (kept?.stages) return kept as CycleReport;
  throw new CommandRefusedError(404, `the research cycle ${cycleWorkflowId(key)} is no longer known to Temporal`);
}

/** What run-cycle answers while its cycle runs: the stages so far, and where to follow it. */
export interface CycleRunningAnswer extends Omit<CycleReport, 'action'> {
  action: 'research_cycle_running';
}

export type CycleAnswer = CycleReport | CycleRunningAnswer;

/** Where the cycle of `cycleId` is, as run-cycle answers it; null when Temporal has no such cycle. */
export async function cycleAnswer(cycles: CycleLauncher, cycleId: string): Promise<CycleAnswer | null> {
  const workflowId = cycleWorkflowId(cycleId);
  const progress = await cycles.cycleProgress(cycleId).catch((error: unknown) => {
    throw new CommandRefusedError(502, { message: `Temporal did not answer for the research cycle ${workflowId}: ${error instanceof Error ? error.message : String(error)}`, workflow_id: workflowId });
  });
  if (!progress) return null;
  if (progress.status === 'completed') return progress.report;
  if (progress.status === 'running') {
    return {
      ok: true,
      action: 'research_cycle_running',
      dry_run: false,
      reason: `the cycle is running; GET /control/api/research/cycles/${encodeURIComponent(cycleId)} follows it`,
      run_cycle_id: cycleId,
      workflow_id: workflowId,
      stages: progress.stages,
    };
  }
  throw new CommandRefusedError(502, { message: `the research cycle ${workflowId} ended ${progress.status.replace('_', ' ')}: ${progress.reason}`, workflow_id: workflowId });
}

/** `GET /control/api/research/cycles/{run_cycle_id}`: where a live cycle is (404 when there is none of that id). */
export async function getCycle(cycles: CycleLauncher, cycleId: string): Promise<CycleAnswer> {
  const answer = await cycleAnswer(cycles, cycleId);
  if (!answer) throw new CommandRefusedError(404, `no research cycle ${cycleWorkflowId(cycleId)}`);
  return answer;
}
