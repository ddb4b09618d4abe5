import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { anyObject, errorResponses, openObject } from '../http/responses.ts';
import { launchNextFollowup } from '../services/followups.ts';
import { createResearchFacility } from '../services/research-facility.ts';
import { idempotencyKey, requestedBy } from './command-fields.ts';
import type { AppDeps } from './deps.ts';

/** Follow-ups of negative and inconclusive runs (README "Follow-ups"). */

const LaunchBody = z.strictObject({
  dry_run: z.boolean().default(true),
  requested_by: requestedBy,
  /** Required for a live launch. */
  idempotency_key: idempotencyKey.optional(),
});

const LaunchAnswer = openObject({
  ok: z.boolean(),
  action: z.enum(['noop', 'dry_run_followup', 'followup_queued', 'followup_recorded']),
  dry_run: z.boolean(),
  reason: z.string(),
  parent_run: anyObject().nullable().describe('The run the follow-up builds on: id, project, decision and its summary'),
  candidate: anyObject().nullable().describe("The follow-up candidate: the planner's decision, score, reasons, and what changed and why"),
  promotion: anyObject().nullable().describe('The queue item made, when the candidate was admitted'),
});

export async function followupRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const facility = createResearchFacility(deps.store, { defaultWorkloadClass: deps.defaultWorkloadClass });
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
