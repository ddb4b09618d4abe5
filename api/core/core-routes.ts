import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { CORE_MODES, SKIP_REASONS, type CorePaperRow, type CoreQueueRow } from '../../capabilities/core/domain/core-snapshot.ts';
import { PAPER_STATUSES, REVIEW_STATUSES } from '../../capabilities/papers/domain/paper-status.ts';
import { QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';
import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';
import { countsOf, errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { HttpError } from '../../platform/http/errors.ts';
import { withinJsonBounds } from '../../platform/http/json-bounds.ts';
import { queryText } from '../../platform/http/validation.ts';
import { readLegacyNotes } from '../../capabilities/core/legacy-notes.ts';
import { PROJECT_ID_PATTERN } from '../../capabilities/runs/projects.ts';
import { AuditEventSchema } from '../audit-event-answer.ts';
import type { AppDeps } from '../deps.ts';

/** Most rows of each kind one snapshot may carry, and the body size that allows (docs/core.md#core). */
export const CORE_SNAPSHOT_LIMITS = { rows: 20_000, body_bytes: 8 * 1024 * 1024 } as const;

/**
 * Bounds on one row as sent, kept whole in the stored snapshot: room for this product's own list rows (a paper's
 * evidence summary names up to 200 result files, about 150 bytes each with their paths and hashes) and a workflow
 * tool's bookkeeping, too small for one row to crowd out the rest of a body.
 */
export const CORE_ROW_MAX_BYTES = 64 * 1024;
export const CORE_ROW_MAX_DEPTH = 8;
const ROW_BOUNDS = { maxBytes: CORE_ROW_MAX_BYTES, maxDepth: CORE_ROW_MAX_DEPTH };

const id = z.string().min(1).max(200);
const smallInt = z.number().int().min(-1_000_000).max(1_000_000);
const queueRowFields = {
  project_id: z.string().regex(PROJECT_ID_PATTERN, 'must be a project id: lowercase letters, digits, . _ -'),
  project_name: z.string().min(1).max(300).optional(),
  status: z.enum(QUEUE_STATUSES),
  manual_review_required: z.boolean().optional(),
  dispatch_priority: smallInt.optional(),
  selection_rank: smallInt.optional(),
  machine_target: id.nullable().optional(),
  workload_class: z.enum(WORKLOAD_CLASSES).optional(),
  current_run_id: id.nullable().optional(),
} satisfies Record<keyof CoreQueueRow, z.ZodType>;
const paperRowFields = {
  paper_id: z.string().min(1).max(500),
  project_id: id.optional(),
  run_id: id.optional(),
  paper_status: z.enum(PAPER_STATUSES),
  review_status: z.enum(REVIEW_STATUSES).optional(),
  rank_score: smallInt.optional(),
} satisfies Record<keyof CorePaperRow, z.ZodType>;

// Rows come from any compatible source, this product's own v1 list rows included: the fields Core reads are checked,
// every other field passes through to the stored snapshot as sent, within the row bounds.
const rowNote = `Other fields are kept as sent in the stored snapshot and ignored; a row is at most ${CORE_ROW_MAX_BYTES} bytes as JSON and nests at most ${CORE_ROW_MAX_DEPTH} levels.`;
const QueueRow = withinJsonBounds(z.looseObject(queueRowFields), 'queue row', ROW_BOUNDS).describe(
  `A queue row from any compatible source (a v1 queue item as listed qualifies). Core reads the fields named here, project_id and status required. ${rowNote}`,
);
const PaperRow = withinJsonBounds(z.looseObject(paperRowFields), 'paper row', ROW_BOUNDS).describe(
  `A paper row from any compatible source (a v1 paper as listed qualifies). Core reads the fields named here, paper_id and paper_status required. ${rowNote}`,
);

// No defaults here: the idempotency hash covers the body as sent, so the parsed body must be exactly that.
const SnapshotBody = z.strictObject({
  idempotency_key: id,
  source: id.optional(),
  mode: z.enum(CORE_MODES).optional(),
  queue_rows: z.array(QueueRow).max(CORE_SNAPSHOT_LIMITS.rows).optional(),
  paper_rows: z.array(PaperRow).max(CORE_SNAPSHOT_LIMITS.rows).optional(),
  captured_at: z.iso.datetime({ offset: true }).optional(),
});

const HealthAnswer = z.object({ ok: z.boolean(), service: z.string(), mode: z.enum(CORE_MODES), db_path: z.string(), timestamp: z.string(), error: z.string().optional() });
const IngestAnswer = z.object({
  ok: z.boolean(),
  mode: z.enum(CORE_MODES),
  inserted: z.boolean(),
  event_id: z.number().int().describe('The audit event of the ingest; 0 when nothing was recorded (mode off)'),
  snapshot_id: z.number().int().describe('0 when nothing was recorded (mode off)'),
  queue_rows: z.number().int(),
  paper_rows: z.number().int(),
  would_apply: z.boolean(),
  message: z.string(),
  warnings: z.array(z.string()).optional().describe('compare mode: where the snapshot and the live queue differ'),
  applied: z.array(z.object({ project_id: z.string(), changed: z.array(z.string()).describe('The fields the row changed') })).optional().describe('enforce mode: the live rows changed'),
  skipped: z.partialRecord(z.enum(SKIP_REASONS), z.number().int()).optional().describe('enforce mode: rows not applied, by reason; reasons with none are left out'),
});

/** The modes a snapshot is recorded in: mode off records nothing. */
const recordedMode = z.enum(CORE_MODES.filter((mode) => mode !== 'off') as Exclude<(typeof CORE_MODES)[number], 'off'>[]);

/** A queue row as Core reads it: the fields named in a snapshot's queue rows, those a row left out absent. */
const CoreQueueRowSchema = z.object({
  project_id: z.string(),
  project_name: z.string().optional(),
  status: z.enum(QUEUE_STATUSES),
  manual_review_required: z.boolean().optional(),
  dispatch_priority: z.number().int().optional(),
  selection_rank: z.number().int().optional(),
  machine_target: z.string().nullable().optional(),
  workload_class: z.enum(WORKLOAD_CLASSES).optional(),
  current_run_id: z.string().nullable().optional(),
});

const ProjectionAnswer = z.object({
  ok: z.literal(true),
  mode: z.enum(CORE_MODES),
  projection_version: z.string(),
  snapshot: z
    .object({ snapshot_id: z.number().int(), source: z.string(), mode: recordedMode, captured_at: z.string(), recorded_at: z.string() })
    .nullable()
    .describe('The snapshot projected; null before the first'),
  total_queue_rows: z.number().int(),
  total_paper_rows: z.number().int(),
  status_counts: countsOf(QUEUE_STATUSES),
  active_rows: z.array(CoreQueueRowSchema).describe('The rows in flight (at most 50), each with the queue row fields Core reads and no others'),
  draft_candidate_count: z.number().int(),
  polish_candidate_count: z.number().int(),
  warnings: z.array(z.string()),
});

const LegacyNotesAnswer = z.object({
  ok: z.literal(true),
  source: z.string(),
  latest_ingest: z
    .object({
      snapshot_id: z.number().int(),
      mode: recordedMode,
      captured_at: z.string(),
      recorded_at: z.string(),
      queue_rows: z.number().int(),
      paper_rows: z.number().int(),
      event_id: z.number().int(),
      warnings: z.array(z.string()),
    })
    .nullable(),
  queued_projects: z.object({ count: z.number().int(), items: z.array(CoreQueueRowSchema).describe('At most 100, each with the queue row fields Core reads and no others') }),
  skipped_reasons: z.partialRecord(z.enum(SKIP_REASONS), z.number().int()).describe('Rows the latest ingest skipped, by reason; reasons with none are left out'),
  recent_events: z.array(AuditEventSchema),
});
export type LegacyNotesDocumented = Assert<Documents<typeof LegacyNotesAnswer, Awaited<ReturnType<typeof readLegacyNotes>>>>;

const tags = ['core'];
const config = { auth: 'control' } as const;

/** Core, under `/svc-core` (docs/core.md#core). */
export async function coreRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'coreSnapshots' | 'dbPath' | 'legacyNotesApiEnabled'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const core = deps.coreSnapshots;

  app.get(
    '/svc-core/health',
    { config, schema: { tags, summary: 'Core health: its mode and store; 503 with ok false when the store does not answer', response: { 200: HealthAnswer, 503: HealthAnswer, ...errorResponses(401) } } },
    async (_request, reply) => {
      const health = await core.health(deps.dbPath);
      return reply.code(health.ok ? 200 : 503).send(health);
    },
  );

  app.post(
    '/svc-core/snapshots/workflow-queue',
    {
      config,
      bodyLimit: CORE_SNAPSHOT_LIMITS.body_bytes,
      schema: {
        tags,
        summary: 'Ingest a queue and paper snapshot (mode off, shadow, compare or enforce); replay-safe by idempotency_key',
        body: SnapshotBody,
        response: { 200: IngestAnswer, ...errorResponses(401, 403, 409, 422, 501) },
      },
    },
    async (request) => core.ingest(request.body, request.id),
  );

  app.get(
    '/svc-core/projections/queue',
    {
      config,
      schema: {
        tags,
        summary: 'The queue projection of the latest recorded snapshot',
        querystring: z.strictObject({ source: queryText(200) }),
        response: { 200: ProjectionAnswer, ...errorResponses(401, 422, 503) },
      },
    },
    async (request) => core.projection(request.query.source),
  );

  app.get(
    '/control/api/intake/legacy-notes',
    {
      config,
      schema: {
        tags: ['research'],
        summary: 'The legacy notes sync as Core saw it: latest ingest, queued projects, skipped rows by reason, recent ingests; 404 unless legacy_notes_api_enabled',
        querystring: z.strictObject({}),
        response: { 200: LegacyNotesAnswer, ...errorResponses(401, 404, 422, 503) },
      },
    },
    async () => {
      if (!deps.legacyNotesApiEnabled) throw new HttpError(404, 'the legacy notes API is off (legacy_notes_api_enabled is false)');
      return readLegacyNotes(deps.store.reads);
    },
  );
}
