import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { anyObject, errorResponses, openObject } from '../http/responses.ts';
import { queryText } from '../http/validation.ts';
import { readResearchQuality } from '../services/research-quality.ts';
import { readSourceLineage, SOURCE_LINEAGE_ORDERS } from '../services/source-lineage.ts';
import type { AppDeps } from './deps.ts';
import { v1ListQuery, v1Page, v1PageBody, walkFrom } from './v1-paging.ts';

const LineageQuery = v1ListQuery(SOURCE_LINEAGE_ORDERS, {
  source_id: queryText(200).describe('Only candidates grounded by this source'),
  candidate_id: queryText(200),
  project_id: queryText(200).describe('Only the candidate this project was promoted from'),
});

const rate = z.number().nullable();
const QualityAnswer = openObject({
  admissions: openObject({ total: z.number().int(), by_decision: anyObject(), by_mode: anyObject() }),
  score_distribution: z.array(openObject({ from: z.number(), to: z.number(), total: z.number().int(), by_decision: anyObject() })),
  rejection_reasons: z.array(openObject({ reason: z.string(), count: z.number().int() })),
  rates: openObject({ admission_rate: rate, merge_rate: rate, promotion_rate: rate, promoted_run_positive_rate: rate }),
  promoted_run_outcomes: z.array(openObject({ state: z.string(), decision: z.string().nullable(), count: z.number().int() })),
});

const LineageItem = openObject({
  candidate: openObject({ candidate_id: z.string(), title: z.string(), decision: z.string() }),
  sources: z.array(anyObject()),
  dedupe: openObject({ dedupe_key: z.string(), merged_into: z.string().nullable(), same_dedupe_key: z.array(anyObject()) }),
  idea_id: z.string().nullable(),
  project: anyObject().nullable(),
  runs: z.array(anyObject()),
  papers: z.array(anyObject()),
});

const tags = ['read models'];
const config = { auth: 'control' } as const;

export async function v1ResearchRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/control/api/v1/research-quality',
    {
      config,
      schema: {
        tags,
        summary: 'Research Facility quality: decisions by mode, score distribution, rejection reasons, merge and promotion rates, outcomes of promoted work',
        querystring: z.strictObject({}),
        response: { 200: QualityAnswer, ...errorResponses(401, 422, 503) },
      },
    },
    async () => readResearchQuality(deps.store.reads),
  );

  app.get(
    '/control/api/v1/source-lineage',
    {
      config,
      schema: {
        tags,
        summary: 'Candidates by cursor, newest first, each with its sources, dedupe context and what came of it (idea, project, runs, papers)',
        querystring: LineageQuery,
        response: { 200: v1PageBody(LineageItem), ...errorResponses(401, 422, 503) },
      },
    },
    async (request) => {
      const { source_id, candidate_id, project_id } = request.query;
      const walk = walkFrom(SOURCE_LINEAGE_ORDERS, request.query);
      return v1Page(await readSourceLineage(deps.store.reads, { source_id, candidate_id, project_id }, walk), walk.order, walk.limit);
    },
  );
}
