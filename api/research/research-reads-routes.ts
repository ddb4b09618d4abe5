import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ADMISSION_DECISIONS, GENERATION_MODES } from '../../capabilities/research/domain/research-candidate.ts';
import { countsOf, errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { CandidateSchema } from './research-answers.ts';
import { queryText } from '../../platform/http/validation.ts';
import { readResearchQuality } from '../../capabilities/research/research-quality.ts';
import { readSourceLineage, SOURCE_LINEAGE_ORDERS } from '../../capabilities/research/source-lineage.ts';
import type { AppDeps } from '../deps.ts';
import { v1ListQuery, v1Page, v1PageBody, walkFrom } from '../v1-paging.ts';

const LineageQuery = v1ListQuery(SOURCE_LINEAGE_ORDERS, {
  source_id: queryText(200).describe('Only candidates grounded by this source'),
  candidate_id: queryText(200),
  project_id: queryText(200).describe('Only the candidate this project was promoted from'),
});

const rate = z.number().nullable().describe('null when there is nothing to divide by');
const byDecision = countsOf(ADMISSION_DECISIONS);
const QualityAnswer = z.object({
  admissions: z.object({ total: z.number().int(), by_decision: byDecision, by_mode: z.object(Object.fromEntries(GENERATION_MODES.map((mode) => [mode, byDecision])) as Record<(typeof GENERATION_MODES)[number], typeof byDecision>) }),
  score_distribution: z.array(z.object({ from: z.number(), to: z.number(), total: z.number().int(), by_decision: byDecision })),
  rejection_reasons: z.array(z.object({ reason: z.string(), count: z.number().int() })),
  rates: z.object({ admission_rate: rate, merge_rate: rate, promotion_rate: rate, promoted_run_positive_rate: rate }),
  promotion: z.object({ admitted: z.number().int(), promoted: z.number().int() }),
  promoted_run_outcomes: z.array(z.object({ state: z.string(), decision: z.string().nullable(), count: z.number().int() })),
});
export type QualityDocumented = Assert<Documents<typeof QualityAnswer, Awaited<ReturnType<typeof readResearchQuality>>>>;

const LineageItem = z.object({
  candidate: CandidateSchema.pick({
    candidate_id: true,
    batch_id: true,
    generation_mode: true,
    title: true,
    decision: true,
    score: true,
    dedupe_key: true,
    merged_into: true,
    queue_admitted: true,
    source_ids: true,
    source_urls: true,
    parent_project_id: true,
    parent_run_id: true,
    similar_prior_projects: true,
    created_at: true,
  }),
  sources: z.array(
    z.union([
      z.object({ source_id: z.string(), kind: z.string(), title: z.string(), url: z.string().nullable() }),
      z.object({ source_id: z.string(), missing: z.literal(true).describe('The candidate names a source the ledger does not hold') }),
    ]),
  ),
  dedupe: z.object({
    dedupe_key: z.string(),
    merged_into: z.string().nullable(),
    similar_prior_projects: z.array(z.string()),
    same_dedupe_key: z.array(z.object({ candidate_id: z.string(), decision: z.enum(ADMISSION_DECISIONS), created_at: z.string() })),
  }),
  idea_id: z.string().nullable(),
  project: z.object({ project_id: z.string(), project_name: z.string(), queue_status: z.string().nullable() }).nullable(),
  runs: z.array(z.object({ run_id: z.string(), state: z.string(), decision: z.string().nullable(), decision_summary: z.string().nullable(), finished_at: z.string().nullable() })),
  papers: z.array(z.object({ run_id: z.string(), paper_id: z.string(), paper_status: z.string(), review_status: z.string(), imported: z.boolean() })),
});
export type LineageItemDocumented = Assert<Documents<typeof LineageItem, Awaited<ReturnType<typeof readSourceLineage>>['items'][number]>>;

const tags = ['read models'];
const config = { auth: 'control' } as const;

export async function v1ResearchRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store'>): Promise<void> {
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
