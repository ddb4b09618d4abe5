import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';
import { CandidateResultSchema } from './research-answers.ts';
import { launchNextFollowup, type FollowupAnswer } from '../../capabilities/research/followups.ts';
import { idempotencyKey, LIVE_CALL_NEEDS_KEY, requestedBy } from '../command-fields.ts';
import type { AppDeps } from '../deps.ts';

/** Follow-ups of negative and inconclusive runs (docs/research.md#follow-ups). */

const LaunchBody = z.strictObject({
  dry_run: z.boolean().default(true),
  requested_by: requestedBy,
  /** Required for a live launch. */
  idempotency_key: idempotencyKey.optional(),
}).meta(LIVE_CALL_NEEDS_KEY);

const LaunchAnswer = z.object({
  ok: z.boolean(),
  action: z.enum(['noop', 'dry_run_followup', 'followup_queued', 'followup_recorded']),
  dry_run: z.boolean(),
  reason: z.string(),
  parent_run: z
    .object({
      run_id: z.string(),
      project_id: z.string(),
      project_name: z.string(),
      decision: z.string(),
      decision_summary: z.string().nullable(),
      machine_target: z.string().nullable(),
      workload_class: z.enum(WORKLOAD_CLASSES).nullable(),
    })
    .nullable()
    .describe('The run the follow-up builds on'),
  candidate: CandidateResultSchema.extend({ hypothesis: z.string(), mechanism: z.string(), novelty_comparison: z.string().describe('What changed and why') })
    .nullable()
    .describe("The follow-up candidate: the planner's decision, score and reasons, and what changed and why"),
  promotion: z.object({ project_id: z.string(), queue_status: z.string() }).nullable().describe('The queue item made, when the candidate was admitted'),
});
export type LaunchDocumented = Assert<Documents<typeof LaunchAnswer, FollowupAnswer>>;

export async function followupRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'facility'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const { facility } = deps;
  const schema = {
    tags: ['research'],
    summary: 'Plan (and queue, when admitted) one follow-up of the next negative or inconclusive run without a paper; dry_run defaults to true',
    body: LaunchBody,
    response: { 200: LaunchAnswer, ...errorResponses(401, 403, 409, 422, 501) },
  };
  app.post('/control/api/v1/followups/launch-next', { config: { auth: 'control' }, schema }, async (request) =>
    launchNextFollowup({ store: deps.store, facility }, request.body),
  );
}
