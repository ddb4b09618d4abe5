import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { BatchResult, ResearchFacility } from '../../capabilities/research/research-facility.ts';
import {
  ADMISSION_DECISIONS,
  CandidateProposalSchema,
  GENERATION_MODES,
  SOURCE_KINDS,
} from '../../capabilities/research/domain/research-candidate.ts';
import { DEFAULT_MIN_ADMISSION_SCORE, NEEDS_REVIEW_MIN_SCORE, PLANNER_VERSION } from '../../capabilities/research/domain/research-planner.ts';
import { SMOKE_BATCH_MAX } from '../../capabilities/research/domain/smoke-batch.ts';
import { latestAdmissions } from '../../capabilities/research/research-admissions.ts';
import { getCandidate, listCandidates } from '../../capabilities/research/research-candidates.ts';
import { facilityCounts, type FacilityCounts } from '../../capabilities/research/store/research-facility-counts.ts';
import { lineageOf } from '../../capabilities/research/research-lineage.ts';
import { idempotencyKey, LIVE_CALL_NEEDS_KEY, requestedBy } from '../command-fields.ts';
import type { AppDeps } from '../deps.ts';
import { HttpError } from '../../platform/http/errors.ts';
import { countsOf, errorResponses, pageBody, type Assert, type Documents } from '../../platform/http/responses.ts';
import { AdmissionSchema, CandidateResultSchema, CandidateSchema, LineageSchema } from './research-answers.ts';
import { ProjectSchema, QueueItemSchema } from '../runs/run-answers.ts';
import { pageOf, queryInt, queryOptional, queryText } from '../../platform/http/validation.ts';

/** Research Facility endpoints (docs/research.md#research-facility-intake): reads of the intake ledgers, and the commands that write them. */

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;

const SourceInputSchema = z.strictObject({
  source_id: z.string().regex(ID_PATTERN, 'must be 1–200 letters, digits, ".", "_", ":" or "-"'),
  kind: z.enum(SOURCE_KINDS),
  title: z.string().trim().min(1).max(500),
  url: z.url({ protocol: /^https?$/ }).optional(),
  summary: z.string().max(4000).optional(),
});

const ImportBody = z.strictObject({
  candidates: z.array(CandidateProposalSchema).min(1).max(50),
  sources: z.array(SourceInputSchema).max(50).default([]),
  dry_run: z.boolean().default(true),
  requested_by: requestedBy,
  idempotency_key: idempotencyKey.optional(),
  batch_id: z.string().regex(ID_PATTERN).optional(),
});

const GenerateBody = z.strictObject({
  dry_run: z.boolean().default(true),
  requested_by: requestedBy,
  count: z.number().int().min(1).max(SMOKE_BATCH_MAX).default(SMOKE_BATCH_MAX),
  idempotency_key: idempotencyKey.optional(),
});

const PromoteBody = z.strictObject({
  candidate_id: z.string().regex(ID_PATTERN),
  dry_run: z.boolean().default(true),
  requested_by: requestedBy,
  /** Required for a live promotion. */
  idempotency_key: idempotencyKey.optional(),
}).meta(LIVE_CALL_NEEDS_KEY);

const CandidatesQuery = z.strictObject({
  decision: queryOptional(z.enum(ADMISSION_DECISIONS)),
  generation_mode: queryOptional(z.enum(GENERATION_MODES)),
  search: queryText(),
  page: queryInt({ min: 1, default: 1 }),
  page_size: queryInt({ min: 1, max: 500, default: 50 }),
});

const CandidateParams = z.strictObject({ candidate_id: z.string().regex(ID_PATTERN) });

const LATEST_DECISIONS = 10;

const FacilityAnswer = z.object({
  ok: z.literal(true),
  planner_version: z.string(),
  min_admission_score: z.number(),
  needs_review_min_score: z.number(),
  counts: z.object({
    sources: z.number().int(),
    candidates: z.number().int(),
    candidates_queue_admitted: z.number().int().describe('Candidates already promoted into the queue'),
    admissions: z.number().int(),
    admissions_by_decision: countsOf(ADMISSION_DECISIONS),
    lineage: z.number().int(),
    ideas: z.number().int(),
    projects: z.number().int(),
    queue_items: z.number().int(),
  }),
  latest_decisions: z.array(AdmissionSchema),
});
export type FacilityCountsDocumented = Assert<Documents<typeof FacilityAnswer.shape.counts, FacilityCounts>>;

const BatchAnswer = z.object({
  ok: z.literal(true),
  dry_run: z.boolean(),
  batch_id: z.string(),
  planner_version: z.string(),
  counts: countsOf(ADMISSION_DECISIONS).describe('Planned candidates by decision'),
  results: z.array(CandidateResultSchema),
  written: z.object({ sources: z.number().int(), candidates: z.number().int(), admissions: z.number().int(), lineage: z.number().int() }),
});
export type BatchDocumented = Assert<Documents<typeof BatchAnswer, BatchResult>>;

const SmokeBatchAnswer = BatchAnswer.extend({
  starter_sources: z.boolean(),
  sources_used: z.array(z.string()),
});

const PromoteAnswer = z.object({
  ok: z.literal(true),
  dry_run: z.boolean(),
  action: z.enum(['would_promote', 'promoted']),
  candidate_id: z.string(),
  project_id: z.string(),
  idea: z.object({ idea_id: z.string(), candidate_id: z.string(), title: z.string(), hypothesis: z.string().nullable() }),
  project: ProjectSchema.omit({ created_at: true, updated_at: true }).extend({ idea_id: z.string(), candidate_id: z.string() }),
  queue_item: QueueItemSchema.pick({ project_id: true, project_name: true, machine_target: true, workload_class: true, gpu_count: true, gpu_memory_mib: true, cpu_count: true }).extend({ status: z.literal('queued'), candidate_id: z.string() }),
  lineage: z.array(LineageSchema.omit({ lineage_id: true, created_at: true })),
});

export type SmokeBatchDocumented = Assert<Documents<typeof SmokeBatchAnswer, Awaited<ReturnType<ResearchFacility['generateSmokeBatch']>>>>;

const CandidateDetailAnswer = CandidateSchema.extend({ admissions: z.array(AdmissionSchema), lineage: z.array(LineageSchema) });

const tags = ['research'];
const config = { auth: 'control' } as const;
const command = errorResponses(401, 403, 409, 422, 501);

export async function researchRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'facility'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const { facility } = deps;

  const overview = { tags, summary: 'Ledger counts and the latest admission decisions', response: { 200: FacilityAnswer, ...errorResponses(401) } };
  app.get('/control/api/research/facility', { config, schema: overview }, async () => {
    const [counts, latest] = await Promise.all([facilityCounts(deps.store), latestAdmissions(deps.store, LATEST_DECISIONS)]);
    return {
      ok: true as const,
      planner_version: PLANNER_VERSION,
      min_admission_score: DEFAULT_MIN_ADMISSION_SCORE,
      needs_review_min_score: NEEDS_REVIEW_MIN_SCORE,
      counts,
      latest_decisions: latest,
    };
  });

  const candidates = {
    tags,
    summary: 'Candidates with their latest admission decision',
    querystring: CandidatesQuery,
    response: { 200: pageBody(CandidateSchema), ...errorResponses(401, 422) },
  };
  app.get('/control/api/research/candidates', { config, schema: candidates }, async (request) => {
    const query = request.query;
    const { items, total } = await listCandidates(deps.store, query);
    return pageOf(items, total, query);
  });

  const candidate = {
    tags,
    summary: 'One candidate with every admission row and its lineage',
    params: CandidateParams,
    response: { 200: CandidateDetailAnswer, ...errorResponses(401, 404, 422) },
  };
  app.get('/control/api/research/candidates/:candidate_id', { config, schema: candidate }, async (request) => {
    const { candidate_id } = request.params;
    const candidate = await getCandidate(deps.store, candidate_id);
    if (!candidate) throw new HttpError(404, `candidate '${candidate_id}' does not exist`);
    return { ...candidate, lineage: await lineageOf(deps.store, 'candidate', candidate_id) };
  });

  const importing = { tags, summary: 'Plan a batch of candidates (dry_run defaults to true)', body: ImportBody, response: { 200: BatchAnswer, ...command } };
  app.post('/control/api/research/import-candidates', { config, schema: importing }, async (request) => facility.importCandidates(request.body));

  const generating = {
    tags,
    summary: 'The deterministic smoke batch (dry_run defaults to true)',
    body: GenerateBody,
    response: { 200: SmokeBatchAnswer, ...command },
  };
  app.post('/control/api/research/generate-batch', { config, schema: generating }, async (request) => facility.generateSmokeBatch(request.body));

  const promoting = {
    tags,
    summary: 'Promote one admitted candidate into the queue (dry_run defaults to true)',
    body: PromoteBody,
    response: { 200: PromoteAnswer, ...errorResponses(401, 403, 404, 409, 422, 501) },
  };
  app.post('/control/api/research/promote-candidate', { config, schema: promoting }, async (request) => facility.promoteCandidate(request.body));
}
