import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { CYCLE_POLICY_DEFAULTS as D, CYCLE_STEP_MAX } from '../domain/research-cycle.ts';
import { errorResponses, openObject } from '../http/responses.ts';
import { createResearchFacility } from '../services/research-facility.ts';
import { runCycle } from '../services/research-cycle.ts';
import { requestedBy } from './command-fields.ts';
import type { AppDeps } from './deps.ts';

/** The bounded research cycle (README "Research cycles"). */

/** Room for the stage suffixes (`:publication_rewrite`) within the 256 characters of a stored key. */
const CYCLE_KEY_MAX = 200;

const step = (fallback: number) => z.number().int().min(0).max(CYCLE_STEP_MAX).default(fallback);

const RunCycleBody = z.strictObject({
  enabled: z.boolean().default(D.enabled),
  max_provider_requests_per_run: step(D.max_provider_requests_per_run),
  max_promotions_per_run: step(D.max_promotions_per_run),
  max_dispatches_per_run: step(D.max_dispatches_per_run),
  wait_for_completion: z.boolean().default(D.wait_for_completion),
  max_paper_drafts_per_run: step(D.max_paper_drafts_per_run),
  max_publication_rewrites_per_run: step(D.max_publication_rewrites_per_run),
  min_admission_score: z.number().min(0).max(100).default(D.min_admission_score),
  require_budget_ok: z.boolean().default(D.require_budget_ok),
  stop_if_queue_active: z.boolean().default(D.stop_if_queue_active),
  stop_if_dashboard_attention: z.boolean().default(D.stop_if_dashboard_attention),
  dry_run: z.boolean().default(true),
  requested_by: requestedBy,
  /** Required for a live cycle: it names the cycle's workflow, and its stages' keys are derived from it. */
  idempotency_key: z.string().min(1).max(CYCLE_KEY_MAX).optional(),
});

const RunCycleAnswer = openObject({
  ok: z.boolean(),
  action: z.enum(['dry_run_research_cycle', 'research_cycle', 'research_cycle_blocked']),
  dry_run: z.boolean(),
  reason: z.string(),
  run_cycle_id: z.string().nullable(),
  workflow_id: z.string().nullable(),
  stages: z.array(openObject({ name: z.string(), action: z.string(), reason: z.string() })).describe('One entry per stage, in order'),
});

export async function researchCycleRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const cycleDeps = {
    store: deps.store,
    dispatch: deps.dispatch,
    facility: createResearchFacility(deps.store, { defaultWorkloadClass: deps.defaultWorkloadClass }),
    researchProvider: deps.researchProvider,
    papers: deps.papers,
    cycles: deps.cycles,
  };
  const schema = {
    tags: ['research'],
    summary: 'A bounded research cycle: stop conditions, provider batch, promotion, dispatch, paper draft and rewrite, each at most once (dry_run defaults to true)',
    body: RunCycleBody,
    response: { 200: RunCycleAnswer, ...errorResponses(401, 403, 409, 422, 501, 502, 504) },
  };
  app.post('/control/api/research/run-cycle', { config: { auth: 'control' }, schema }, async (request) => runCycle(cycleDeps, request.body));
}
