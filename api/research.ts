import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { createResearchFacility } from '../services/research-facility.ts';
import {
  ADMISSION_DECISIONS,
  CandidateProposalSchema,
  GENERATION_MODES,
  SOURCE_KINDS,
} from '../domain/research-candidate.ts';
import { DEFAULT_MIN_ADMISSION_SCORE, NEEDS_REVIEW_MIN_SCORE, PLANNER_VERSION } from '../domain/research-planner.ts';
import { SMOKE_BATCH_MAX } from '../domain/smoke-batch.ts';
import { latestAdmissions } from '../store/research-admissions.ts';
import { getCandidate, listCandidates } from '../store/research-candidates.ts';
import { facilityCounts } from '../store/research-facility-counts.ts';
import { lineageOf } from '../store/research-lineage.ts';
import type { AppDeps } from './deps.ts';
import { HttpError } from '../http/errors.ts';
import { pageOf, queryInt, queryOptional, queryText } from '../http/validation.ts';

/** Research Facility endpoints (decisions §7): reads of the intake ledgers, and the commands that write them. */

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;
const requestedBy = z.string().trim().min(1).max(200);
const idempotencyKey = z.string().min(1).max(256);

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
});

const CandidatesQuery = z.strictObject({
  decision: queryOptional(z.enum(ADMISSION_DECISIONS)),
  generation_mode: queryOptional(z.enum(GENERATION_MODES)),
  search: queryText(),
  page: queryInt({ min: 1, default: 1 }),
  page_size: queryInt({ min: 1, max: 500, default: 50 }),
});

const CandidateParams = z.strictObject({ candidate_id: z.string().regex(ID_PATTERN) });

const LATEST_DECISIONS = 10;

export async function researchRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const facility = createResearchFacility(deps.store, { defaultWorkloadClass: deps.defaultWorkloadClass });

  app.get('/control/api/research/facility', async () => {
    const [counts, latest] = await Promise.all([facilityCounts(deps.store), latestAdmissions(deps.store, LATEST_DECISIONS)]);
    return {
      ok: true,
      planner_version: PLANNER_VERSION,
      min_admission_score: DEFAULT_MIN_ADMISSION_SCORE,
      needs_review_min_score: NEEDS_REVIEW_MIN_SCORE,
      counts,
      latest_decisions: latest,
    };
  });

  app.get('/control/api/research/candidates', { schema: { querystring: CandidatesQuery } }, async (request) => {
    const query = request.query as z.output<typeof CandidatesQuery>;
    const { items, total } = await listCandidates(deps.store, query);
    return pageOf(items, total, query);
  });

  app.get('/control/api/research/candidates/:candidate_id', { schema: { params: CandidateParams } }, async (request) => {
    const { candidate_id } = request.params as z.output<typeof CandidateParams>;
    const candidate = await getCandidate(deps.store, candidate_id);
    if (!candidate) throw new HttpError(404, `candidate '${candidate_id}' does not exist`);
    return { ...candidate, lineage: await lineageOf(deps.store, 'candidate', candidate_id) };
  });

  app.post('/control/api/research/import-candidates', { schema: { body: ImportBody } }, async (request) =>
    facility.importCandidates(request.body as z.output<typeof ImportBody>),
  );

  app.post('/control/api/research/generate-batch', { schema: { body: GenerateBody } }, async (request) =>
    facility.generateSmokeBatch(request.body as z.output<typeof GenerateBody>),
  );

  app.post('/control/api/research/promote-candidate', { schema: { body: PromoteBody } }, async (request) =>
    facility.promoteCandidate(request.body as z.output<typeof PromoteBody>),
  );
}
