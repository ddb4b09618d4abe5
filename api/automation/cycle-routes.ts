import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { CYCLE_POLICY_DEFAULTS as D, CYCLE_STEP_MAX } from '../../capabilities/automation/domain/cycle-policy.ts';
import { JsonValueSchema } from '../../platform/http/json-value.ts';
import { errorResponses } from '../../platform/http/responses.ts';
import { CYCLE_STAGES } from '../../capabilities/automation/domain/cycle-policy.ts';
import { getCycle, runCycle } from '../../capabilities/automation/research-cycle.ts';
import { LIVE_CALL_NEEDS_KEY, requestedBy } from '../command-fields.ts';
import type { AppDeps } from '../deps.ts';

/** The bounded research cycle (docs/automation.md#research-cycles). */

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
}).meta(LIVE_CALL_NEEDS_KEY);

const RunCycleAnswer = z.object({
  ok: z.boolean(),
  action: z.enum(['dry_run_research_cycle', 'research_cycle', 'research_cycle_blocked', 'research_cycle_running']),
  dry_run: z.boolean(),
  reason: z.string(),
  run_cycle_id: z.string().nullable(),
  workflow_id: z.string().nullable(),
  stages: z
    .array(
      z
        .object({ name: z.enum(CYCLE_STAGES), action: z.string(), reason: z.string() })
        .catchall(JsonValueSchema)
        .describe('Each stage adds its details (ids, counts, the candidate and route it dispatched). Open: a cycle reports the details of the workflow version that ran it, and one started before an upgrade runs on'),
    )
    .describe('One entry per stage, in order'),
});

export async function researchCycleRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dispatch' | 'facility' | 'researchProvider' | 'paperDrafting' | 'cycles'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const cycleDeps = {
    store: deps.store,
    dispatch: deps.dispatch,
    facility: deps.facility,
    researchProvider: deps.researchProvider,
    paperDrafting: deps.paperDrafting,
    cycles: deps.cycles,
  };
  const schema = {
    tags: ['research'],
    summary: 'A bounded research cycle: stop conditions, provider batch, promotion, dispatch, paper draft and rewrite, each at most once (dry_run defaults to true)',
    body: RunCycleBody,
    response: { 200: RunCycleAnswer, ...errorResponses(401, 403, 409, 422, 501, 502, 503, 504) },
  };
  app.post('/control/api/research/run-cycle', { config: { auth: 'control' }, schema }, async (request) => runCycle(cycleDeps, request.body));

  const followSchema = {
    tags: ['research'],
    summary: 'Where a live research cycle is: research_cycle_running with the stages finished so far, or its report once it has finished',
    params: z.strictObject({ run_cycle_id: z.string().min(1).max(CYCLE_KEY_MAX).describe('The idempotency key of the run-cycle call that started it') }),
    response: { 200: RunCycleAnswer, ...errorResponses(401, 403, 404, 422, 502, 503) },
  };
  app.get('/control/api/research/cycles/:run_cycle_id', { config: { auth: 'control' }, schema: followSchema }, async (request) => getCycle(deps.cycles, request.params.run_cycle_id));
}
