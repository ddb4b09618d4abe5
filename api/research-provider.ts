import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { anyObject, errorResponses, openObject } from '../http/responses.ts';
import { generateProviderBatch, providerBudget } from '../services/provider-batch.ts';
import { createResearchFacility } from '../services/research-facility.ts';
import { idempotencyKey, requestedBy } from './command-fields.ts';
import type { AppDeps } from './deps.ts';

/** Provider-backed generation and its budget (README "Provider-backed generation"). */

export const PROVIDER_BATCH_MAX = 5;

const ProviderBatchBody = z.strictObject({
  dry_run: z.boolean().default(true),
  requested_by: requestedBy,
  count: z.number().int().min(1).max(PROVIDER_BATCH_MAX).default(2),
  /** Required for a live batch. */
  idempotency_key: idempotencyKey.optional(),
});

const QuotaWindow = openObject({ limit: z.number().int(), remaining: z.number().int(), resets_at: z.string() });

export const ProviderBudgetAnswer = openObject({
  ok: z.boolean(),
  reason: z.string(),
  remaining_credits: z.number().nullable(),
  window: QuotaWindow.nullable(),
  requests_last_24h: z.number().int(),
  checked_at: z.string(),
});

const ProviderBatchAnswer = openObject({
  ok: z.boolean(),
  action: z.enum(['dry_run_provider_generation', 'provider_generation', 'provider_generation_blocked']),
  dry_run: z.boolean(),
  reason: z.string(),
  budget: ProviderBudgetAnswer,
  batch_id: z.string().optional(),
  provider: anyObject().optional().describe('The request sent: outcome, status, tokens, cost, duration'),
  counts: anyObject().optional(),
  results: z.array(anyObject()).optional(),
  invalid: z.array(anyObject()).optional().describe('Proposed candidates that failed validation: reported, not stored'),
});

const tags = ['research'];
const config = { auth: 'control' } as const;

export async function researchProviderRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const facility = createResearchFacility(deps.store, { defaultWorkloadClass: deps.defaultWorkloadClass });
  const providerDeps = { store: deps.store, facility, settings: deps.researchProvider };

  const budget = { tags, summary: "The research provider's quota judged against the configured reserve", response: { 200: ProviderBudgetAnswer, ...errorResponses(401) } };
  app.get('/control/api/research/provider-budget', { config, schema: budget }, async () => providerBudget(providerDeps));

  const generating = {
    tags,
    summary: 'Ask the research provider for candidates (dry_run defaults to true; fail-closed on its budget)',
    body: ProviderBatchBody,
    response: { 200: ProviderBatchAnswer, ...errorResponses(401, 403, 409, 422, 501, 502, 504) },
  };
  app.post('/control/api/research/generate-provider-batch', { config, schema: generating }, async (request) => generateProviderBatch(providerDeps, request.body));
}
