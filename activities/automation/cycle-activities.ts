import type { CyclePolicy, CycleStage } from '../../capabilities/automation/domain/cycle-policy.ts';
import { selectDispatch, type DispatchSelection } from '../../capabilities/runs/dispatch.ts';
import {
  onceForCycle,
  paperDraftStage,
  promoteStage,
  providerStage,
  publicationRewriteStage,
  stopConditionStage,
  type CycleDeps,
} from '../../capabilities/automation/research-cycle.ts';
import { selectRewrites } from '../../capabilities/papers/paper-drafting.ts';
import type { PaperRef } from '../../workflows/papers/paper-messages.ts';
import { heartbeating } from '../heartbeat.ts';

/**
 * Activities of the research-cycle workflow (workflows/automation/research-cycle-workflow.ts). A stage that writes runs once per cycle
 * (capabilities/automation/research-cycle.ts onceForCycle): a retry after a crash answers the first outcome instead of spending,
 * promoting or drafting again. Reads (the stop conditions, the dispatch selection) may simply run again.
 */

export interface CycleStageInput {
  cycle_id: string;
  requested_by: string;
  policy: CyclePolicy;
}

export function createCycleActivities(deps: CycleDeps) {
  const live = (input: CycleStageInput) => ({ cycle_id: input.cycle_id, requested_by: input.requested_by, dry_run: false });
  return {
    cycleStopConditions: (input: CycleStageInput): Promise<CycleStage & { stopped: boolean }> => stopConditionStage(deps, input.policy),

    cycleProviderBatch: (input: CycleStageInput): Promise<CycleStage> =>
      heartbeating(() => onceForCycle(deps.store, input.cycle_id, 'provider_batch', () => providerStage(deps, input.policy, live(input)))),

    cyclePromote: (input: CycleStageInput): Promise<CycleStage> =>
      onceForCycle(deps.store, input.cycle_id, 'promote', () => promoteStage(deps, input.policy, live(input))),

    cycleSelectDispatch: (input: CycleStageInput): Promise<DispatchSelection> =>
      selectDispatch({ store: deps.store, settings: deps.dispatch }, { requested_by: input.requested_by, dry_run: false }),

    /** The papers of the rewrite stage, which the workflow rewrites as a rewrite batch, its child. */
    cycleSelectRewrites: async (input: CycleStageInput): Promise<PaperRef[]> =>
      (await selectRewrites(deps.store, { limit: input.policy.max_publication_rewrites_per_run, force: false, skip_rewritten: true })).map(({ paper_id, project_id, run_id }) => ({ paper_id, project_id, run_id })),

    /** The paper stage of cycles started before the child-workflows patch (workflows/patches.ts); new cycles run a draft-next child. */
    cyclePaperDraft: (input: CycleStageInput): Promise<CycleStage> =>
      heartbeating(() => onceForCycle(deps.store, input.cycle_id, 'paper_draft', () => paperDraftStage(deps, input.policy, live(input)))),

    /** The rewrite stage of cycles started before the child-workflows patch. */
    cyclePublicationRewrite: (input: CycleStageInput): Promise<CycleStage> =>
      heartbeating(() => onceForCycle(deps.store, input.cycle_id, 'publication_rewrite', () => publicationRewriteStage(deps, input.policy, live(input)))),
  };
}

export type CycleActivities = ReturnType<typeof createCycleActivities>;
