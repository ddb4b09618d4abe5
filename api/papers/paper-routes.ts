import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { CHECKLIST_ITEM_IDS, CHECKLIST_STATUSES, CHECKLIST_STATUSES_NEEDING_A_NOTE, PAPER_STATUSES, REVIEW_STATUSES, type ReviewStatus } from '../../capabilities/papers/domain/paper-status.ts';
import { HttpError } from '../../platform/http/errors.ts';
import { errorResponses, pageBody } from '../../platform/http/responses.ts';
import { pageOf, queryBool, queryInt, queryOptional, querySort, queryText } from '../../platform/http/validation.ts';
import { listPapers, PAPER_SORT_COLUMNS, type PaperRow } from '../../capabilities/papers/paper-ledger.ts';
import { ChecklistItemSchema, CorpusImportSchema, PaperSchema, PaperWithChecklistSchema, ReviewHistorySchema } from './paper-answers.ts';
import { idempotencyKey, noteNeededFor, requestedBy } from '../command-fields.ts';
import type { AppDeps } from '../deps.ts';

/**
 * Paper reads and review commands (docs/papers.md#papers). The review routes are mounted twice, under
 * `/control/api/publication-automation` (preferred) and `/control/api/paper-reviews`, and answer the same.
 */

export const REVIEW_MOUNTS = ['/control/api/publication-automation', '/control/api/paper-reviews'] as const;

const note = z.string().max(10_000);
const sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits');

const PaperParams = z.strictObject({ paper_id: z.string().min(1).max(400) });
const ChecklistParams = z.strictObject({ paper_id: z.string().min(1).max(400), item_id: z.enum(CHECKLIST_ITEM_IDS) });

const sort = (fallback: `-${(typeof PAPER_SORT_COLUMNS)[number]}`) => querySort(PAPER_SORT_COLUMNS).default(fallback);

const PapersQuery = z.strictObject({
  page: queryInt({ min: 1, default: 1 }),
  page_size: queryInt({ min: 1, max: 500, default: 50 }),
  search: queryText(),
  status: queryOptional(z.enum(PAPER_STATUSES)),
  sort: sort('-updated_at'),
});

const ReviewsQuery = z.strictObject({
  page: queryInt({ min: 1, default: 1 }),
  page_size: queryInt({ min: 1, max: 500, default: 50 }),
  search: queryText(),
  review_status: queryOptional(z.enum(REVIEW_STATUSES)),
  paper_status: queryOptional(z.enum(PAPER_STATUSES)),
  include_rank_reasons: queryBool(true),
  sort: sort('-rank_score'),
});

const StatusBody = z.strictObject({
  idempotency_key: idempotencyKey,
  requested_by: requestedBy,
  review_status: z.enum(REVIEW_STATUSES),
  note: note.optional(),
  blocker: note.optional(),
});

const ApproveBody = z.strictObject({ idempotency_key: idempotencyKey, requested_by: requestedBy, note: note.optional() });

const ChecklistBody = z.strictObject({
  idempotency_key: idempotencyKey,
  requested_by: requestedBy,
  status: z.enum(CHECKLIST_STATUSES),
  note: note.optional(),
}).meta(noteNeededFor(CHECKLIST_STATUSES_NEEDING_A_NOTE));

const ImportBody = z.strictObject({
  idempotency_key: idempotencyKey,
  requested_by: requestedBy,
  corpus_repo: z.string().trim().min(1).max(500),
  commit_sha: z.string().regex(/^[0-9a-f]{7,64}$/, 'must be 7–64 lowercase hex digits'),
  manifest_sha256: sha256,
});

const ReviewRowSchema = PaperSchema.extend({ rank_reasons: z.array(z.string()).optional().describe('Left out when include_rank_reasons is false') });

/** What every paper command answers: the paper as it is now, with its checklist. */
const CommandAnswer = z.object({ ok: z.literal(true), paper_id: z.string(), paper: PaperWithChecklistSchema });
const ReviewMoveAnswer = CommandAnswer.extend({
  changed: z.boolean().describe('False when the review was already where the command would move it'),
  review_status: z.object({ from: z.enum(REVIEW_STATUSES), to: z.enum(REVIEW_STATUSES) }),
  history: ReviewHistorySchema.optional().describe('The review move recorded; absent when nothing changed'),
});
const ChecklistAnswer = CommandAnswer.extend({ item: ChecklistItemSchema.describe('The item as it is now') });
const CorpusImportAnswer = CommandAnswer.extend({ corpus_import: CorpusImportSchema });

/** A review row: the paper without its rank reasons unless asked for. */
function reviewRow(paper: PaperRow, includeReasons: boolean) {
  if (includeReasons) return paper;
  const { rank_reasons: _reasons, ...rest } = paper;
  return rest;
}

/** `next` looks at publication drafts by default, and never at a finished review. */
const NEXT_DEFAULT_PAPER_STATUS = 'publication_draft';
const NEXT_EXCLUDED: readonly ReviewStatus[] = ['finalized', 'rejected'];

export async function paperRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'paperReviews'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const reviews = deps.paperReviews;
  const config = { auth: 'control' } as const;
  const command = errorResponses(400, 401, 403, 404, 409, 422);

  app.get(
    '/control/api/papers',
    {
      config,
      schema: { tags: ['papers'], summary: 'Papers, paged, filtered by paper_status and sorted (default -updated_at)', querystring: PapersQuery, response: { 200: pageBody(PaperSchema), ...errorResponses(401, 422) } },
    },
    async (request) => {
      const { status, ...query } = request.query;
      const { items, total } = await listPapers(deps.store, { ...query, paper_status: status });
      return pageOf(items, total, query);
    },
  );

  for (const mount of REVIEW_MOUNTS) {
    const tags = ['paper reviews'];
    app.get(
      mount,
      {
        config,
        schema: { tags, summary: 'Review rows, highest rank first by default, with their rank reasons unless include_rank_reasons is false', querystring: ReviewsQuery, response: { 200: pageBody(ReviewRowSchema), ...errorResponses(401, 422) } },
      },
      async (request) => {
        const { include_rank_reasons: reasons, ...query } = request.query;
        const { items, total } = await listPapers(deps.store, query);
        return pageOf(items.map((paper) => reviewRow(paper, reasons)), total, query);
      },
    );

    app.get(
      `${mount}/next`,
      {
        config,
        schema: {
          tags,
          summary: 'The highest-ranked review row matching the filters (by default a publication draft whose review is not finalized or rejected); 404 when none',
          querystring: ReviewsQuery.omit({ page: true, page_size: true }),
          response: { 200: ReviewRowSchema, ...errorResponses(401, 404, 422) },
        },
      },
      async (request) => {
        const { include_rank_reasons: reasons, ...query } = request.query;
        const { items } = await listPapers(deps.store, {
          ...query,
          paper_status: query.paper_status ?? NEXT_DEFAULT_PAPER_STATUS,
          exclude_review_statuses: query.review_status ? [] : NEXT_EXCLUDED,
          page: 1,
          page_size: 1,
        });
        if (!items[0]) throw new HttpError(404, 'no paper matches: nothing to review');
        return reviewRow(items[0], reasons);
      },
    );

    app.post(
      `${mount}/:paper_id/status`,
      { config, schema: { tags, summary: 'Move the raw review_status (compatibility path); a move outside the transition table is 400', params: PaperParams, body: StatusBody, response: { 200: ReviewMoveAnswer, ...command } } },
      async (request) => reviews.moveReviewStatus(request.params.paper_id, request.body, { request_id: request.id }),
    );

    app.post(
      `${mount}/:paper_id/approve-finalization`,
      { config, schema: { tags, summary: 'Mark the review approved for finalization (compatibility path, not the normal gate)', params: PaperParams, body: ApproveBody, response: { 200: ReviewMoveAnswer, ...command } } },
      async (request) => reviews.approveFinalization(request.params.paper_id, request.body, { request_id: request.id }),
    );

    app.post(
      `${mount}/:paper_id/checklist/:item_id`,
      { config, schema: { tags, summary: 'Set one checklist item; fail and accepted_risk need a note', params: ChecklistParams, body: ChecklistBody, response: { 200: ChecklistAnswer, ...command } } },
      async (request) => reviews.setChecklistItem(request.params.paper_id, request.params.item_id, request.body, { request_id: request.id }),
    );
  }

  app.post(
    '/control/api/publication-automation/:paper_id/record-import',
    {
      config,
      schema: {
        tags: ['paper reviews'],
        summary: "Record that a finalized paper's package is in a corpus; the paper then counts as published_imported",
        params: PaperParams,
        body: ImportBody,
        response: { 200: CorpusImportAnswer, ...command },
      },
    },
    async (request) => reviews.recordImport(request.params.paper_id, request.body, { request_id: request.id }),
  );
}
