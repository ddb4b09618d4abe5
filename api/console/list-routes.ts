import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { resolveLane } from '../../capabilities/runs/domain/worker-lanes.ts';
import { PAPER_STATUSES, REVIEW_STATUSES } from '../../capabilities/papers/domain/paper-status.ts';
import { QUEUE_GROUPS, QUEUE_ITEM_COMMANDS, QUEUE_STATUSES, queueItemCommands } from '../../capabilities/runs/domain/queue-status.ts';
import { RUN_STATES } from '../../capabilities/runs/domain/run-state.ts';
import { HttpError } from '../../platform/http/errors.ts';
import { errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { queryInt, queryOptional, queryText } from '../../platform/http/validation.ts';
import { paperDetail, paperDraftText } from '../../capabilities/papers/paper-detail.ts';
import { PAPER_ORDERS, walkPapers } from '../../capabilities/papers/paper-reads.ts';
import { PROJECT_ORDERS, readProjectDetail, walkProjects, type ProjectListRow } from '../../capabilities/console/project-reads.ts';
import type { QueueItemRow } from '../../capabilities/runs/queue-items.ts';
import { QUEUE_ORDERS, walkQueueItems } from '../../capabilities/queue/queue-reads.ts';
import { RUN_ORDERS, walkRuns } from '../../capabilities/runs/run-reads.ts';
import { AuditEventSchema } from '../audit-event-answer.ts';
import { ProjectDetailAnswer, RunListRowSchema } from './console-answers.ts';
import { CorpusImportSchema, FinalizationPackageSchema, PaperSchema, PaperWithChecklistSchema, ReviewHistorySchema } from '../papers/paper-answers.ts';
import { ProjectSchema, QueueItemSchema } from '../runs/run-answers.ts';
import type { AppDeps } from '../deps.ts';
import { v1ListQuery, v1Page, v1PageBody, walkFrom } from '../v1-paging.ts';

/**
 * The bounded v1 lists and details (docs/console.md#read-models): keyset cursors, page_size 1–200, every nested list
 * capped, every statement on the store's read pool (cut off after its statement timeout).
 */

const QueueQuery = v1ListQuery(QUEUE_ORDERS, {
  group: queryOptional(z.enum(QUEUE_GROUPS)).describe('A queue tab (docs/queue.md#the-queue); every row when absent'),
  status: queryOptional(z.enum(QUEUE_STATUSES)),
  search: queryText(),
});

const RunsQuery = v1ListQuery(RUN_ORDERS, {
  state: queryOptional(z.enum(RUN_STATES)),
  project: queryText(200).describe('Only the runs of this project_id'),
  search: queryText(),
});

const ProjectsQuery = v1ListQuery(PROJECT_ORDERS, { search: queryText() });

const PapersQuery = v1ListQuery(PAPER_ORDERS, {
  status: queryOptional(z.enum(PAPER_STATUSES)).describe('paper_status'),
  review_status: queryOptional(z.enum(REVIEW_STATUSES)),
  search: queryText(),
});

/** A page of queue rows, each with the operator commands its status allows (the v1 queue's answer). */
export function withOperatorActions<Page extends { items: QueueItemRow[] }>(page: Page) {
  return { ...page, items: page.items.map((item) => ({ ...item, operator_actions: queueItemCommands(item) })) };
}

/** A v1 queue row: the queue item and the operator commands it takes now (what a dashboard offers for it). */
const QueueRowSchema = QueueItemSchema.extend({
  operator_actions: z.array(z.enum(Object.keys(QUEUE_ITEM_COMMANDS) as [keyof typeof QUEUE_ITEM_COMMANDS])).describe('The commands the row takes now, as its status and review flag allow: mark_paused, requeue, dispatch (dispatch-next with its project_id)'),
});

const ProjectRowSchema = ProjectSchema.extend({
  queue_status: z.enum(QUEUE_STATUSES).nullable().describe('The status of the project\'s queue item; null when it has none'),
  current_run_id: z.string().nullable(),
});
export type ProjectRowDocumented = Assert<Documents<typeof ProjectRowSchema, ProjectListRow>>;

const detailQuery = z.strictObject({ event_limit: queryInt({ min: 1, max: 200, default: 50 }) });
const ProjectParams = z.strictObject({ project_id: z.string().min(1).max(200) });
const PaperParams = z.strictObject({ paper_id: z.string().min(1).max(500) });


const PaperDetailAnswer = z.object({
  paper: PaperWithChecklistSchema,
  review_moves: z.array(z.enum(REVIEW_STATUSES)).describe('The review_status values the status command accepts from the current one'),
  project: ProjectSchema.nullable(),
  run: RunListRowSchema.nullable(),
  review_history: z.array(ReviewHistorySchema),
  finalization_packages: z.array(FinalizationPackageSchema),
  corpus_import: CorpusImportSchema.nullable(),
  events: z.array(AuditEventSchema),
});
export type PaperDetailDocumented = Assert<Documents<typeof PaperDetailAnswer, NonNullable<Awaited<ReturnType<typeof paperDetail>>>>>;

const PaperDraftAnswer = z.object({
  paper_id: z.string(),
  title: z.string().nullable(),
  writer: z.string().nullable(),
  path: z.string().describe('Relative to state_dir'),
  sha256: z.string(),
  bytes: z.number().int(),
  markdown: z.string().describe('The draft as written, Markdown; show it as text, never as HTML'),
});

const tags = ['read models'];
const config = { auth: 'control' } as const;
const listErrors = errorResponses(401, 422, 503);

export async function v1ListRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dispatch' | 'papers'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const reads = deps.store.reads;
  const laneOf = (item: QueueItemRow): string | null => {
    const lane = resolveLane(item, deps.dispatch.routing);
    return lane.ok ? lane.target.name : null;
  };

  app.get(
    '/control/api/v1/queue',
    { config, schema: { tags, summary: 'Queue items by cursor (default: the dispatch order)', querystring: QueueQuery, response: { 200: v1PageBody(QueueRowSchema), ...listErrors } } },
    async (request) => {
      const { group, status, search } = request.query;
      const walk = walkFrom(QUEUE_ORDERS, request.query);
      return withOperatorActions(v1Page(await walkQueueItems(reads, { group: group ?? 'all', status, search, ...walk }), walk.order, walk.limit));
    },
  );

  app.get(
    '/control/api/v1/runs',
    { config, schema: { tags, summary: 'Runs by cursor, newest first by default, without the gate\'s large answers', querystring: RunsQuery, response: { 200: v1PageBody(RunListRowSchema), ...listErrors } } },
    async (request) => {
      const { state, project, search } = request.query;
      const walk = walkFrom(RUN_ORDERS, request.query);
      return v1Page(await walkRuns(reads, { state, project_id: project, search, ...walk }), walk.order, walk.limit);
    },
  );

  app.get(
    '/control/api/v1/projects',
    { config, schema: { tags, summary: 'Projects by cursor with their queue status, newest first by default', querystring: ProjectsQuery, response: { 200: v1PageBody(ProjectRowSchema), ...listErrors } } },
    async (request) => {
      const walk = walkFrom(PROJECT_ORDERS, request.query);
      return v1Page(await walkProjects(reads, { search: request.query.search, ...walk }), walk.order, walk.limit);
    },
  );

  app.get(
    '/control/api/v1/papers',
    { config, schema: { tags, summary: 'Papers by cursor, highest rank first by default', querystring: PapersQuery, response: { 200: v1PageBody(PaperSchema), ...listErrors } } },
    async (request) => {
      const { status, review_status, search } = request.query;
      const walk = walkFrom(PAPER_ORDERS, request.query);
      return v1Page(await walkPapers(reads, { paper_status: status, review_status, search, ...walk }), walk.order, walk.limit);
    },
  );

  app.get(
    '/control/api/v1/projects/:project_id',
    {
      config,
      schema: {
        tags,
        summary: 'One project: its queue item, newest runs and papers, recent events, worker observations and lineage, each capped',
        params: ProjectParams,
        querystring: detailQuery,
        response: { 200: ProjectDetailAnswer, ...errorResponses(401, 404, 422, 503) },
      },
    },
    async (request) => {
      const { project_id } = request.params;
      const detail = await readProjectDetail(reads, project_id, { eventLimit: request.query.event_limit, resolveLane: laneOf });
      if (!detail) throw new HttpError(404, `unknown project '${project_id}'`);
      return detail;
    },
  );

  app.get(
    '/control/api/v1/papers/:paper_id',
    {
      config,
      schema: {
        tags,
        summary: 'One paper with its checklist: its project, its run, review moves, packages, import and recent events, each capped',
        params: PaperParams,
        querystring: detailQuery,
        response: { 200: PaperDetailAnswer, ...errorResponses(401, 404, 422, 503) },
      },
    },
    async (request) => {
      const { paper_id } = request.params;
      const detail = await paperDetail(reads, paper_id, request.query.event_limit);
      if (!detail) throw new HttpError(404, `unknown paper '${paper_id}'`);
      return detail;
    },
  );

  app.get(
    '/control/api/v1/papers/:paper_id/draft',
    {
      config,
      schema: {
        tags,
        summary: 'The text of a paper\'s current draft, checked against the sha256 recorded with it; 404 before the first draft',
        params: PaperParams,
        response: { 200: PaperDraftAnswer, ...errorResponses(401, 404, 409, 422, 503) },
      },
    },
    async (request) => paperDraftText(reads, deps.papers.settings.stateDir, request.params.paper_id),
  );
}
