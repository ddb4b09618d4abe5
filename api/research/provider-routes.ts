import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { countsOf, errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { PROVIDER_OUTCOMES } from '../../capabilities/research/domain/provider-budget.ts';
import { ADMISSION_DECISIONS } from '../../capabilities/research/domain/research-candidate.ts';
import { CandidateResultSchema } from './research-answers.ts';
import { generateProviderBatch, providerBudget, type ProviderBatchAnswer as ProviderBatchAnswerType } from '../../capabilities/research/provider-batch.ts';
import { idempotencyKey, LIVE_CALL_NEEDS_KEY, requestedBy } from '../command-fields.ts';
import type { AppDeps } from '../deps.ts';

/** Provider-backed generation and its budget (docs/research.md#provider-backed-generation). */

export const PROVIDER_BATCH_MAX = 5;

const ProviderBatchBody = z.strictObject({
  dry_run: z.boolean().default(true),
  requested_by: requestedBy,
  count: z.number().int().min(1).max(PROVIDER_BATCH_MAX).default(2),
  /** Required for a live batch. */
  idempotency_key: idempotencyKey.optional(),
}).meta(LIVE_CALL_NEEDS_KEY);

const QuotaWindow = z.object({ limit: z.number().int(), remaining: z.number().int(), resets_at: z.string() });

export const ProviderBudgetAnswer = z.object({
  ok: z.boolean(),
  reason: z.string(),
  remaining_credits: z.number().nullable(),
  window: QuotaWindow.nullable(),
  requests_last_24h: z.number().int(),
  checked_at: z.string(),
});

const ProviderBatchAnswer = z.object({
  ok: z.boolean(),
  action: z.enum(['dry_run_provider_generation', 'provider_generation', 'provider_generation_blocked']),
  dry_run: z.boolean(),
  reason: z.string(),
  budget: ProviderBudgetAnswer,
  count: z.number().int().optional().describe('Candidates asked for'),
  batch_id: z.string().optional(),
  provider: z
    .object({
      request_id: z.number().int().describe('The provider_requests ledger row'),
      outcome: z.enum(PROVIDER_OUTCOMES),
      http_status: z.number().int().nullable(),
      duration_ms: z.number(),
      prompt_tokens: z.number().int().nullable(),
      completion_tokens: z.number().int().nullable(),
      total_tokens: z.number().int().nullable(),
      cost: z.number().nullable().describe('What the provider reported the call cost, when it reports it'),
      detail: z.string(),
    })
    .optional()
    .describe('The request sent: outcome, status, tokens, cost, duration'),
  counts: countsOf(ADMISSION_DECISIONS).optional(),
  results: z.array(CandidateResultSchema).optional(),
  invalid: z.array(z.object({ index: z.number().int(), problems: z.array(z.string()) })).optional().describe('Proposed candidates that failed validation: reported, not stored'),
  written: z.object({ sources: z.number().int(), candidates: z.number().int(), admissions: z.number().int(), lineage: z.number().int() }).optional(),
});
export type ProviderBatchDocumented = Assert<Documents<typeof ProviderBatchAnswer, ProviderBatchAnswerType>>;

const tags = ['research'];
const config = { auth: 'control' } as const;

export async function researchProviderRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'facility' | 'researchProvider'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const { facility } = deps;
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
