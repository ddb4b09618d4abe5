import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PAPER_PIPELINE_COUNTS } from '../../capabilities/papers/domain/paper-candidacy.ts';
import { QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';
import { RUN_STATES } from '../../capabilities/runs/domain/run-state.ts';
import { countsOf, errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { queryBool } from '../../platform/http/validation.ts';
import { AlertFindingSchema } from '../automation/alert-answers.ts';
import { FlagsSchema, PreflightCheckSchema, QueueItemSchema } from '../runs/run-answers.ts';
import { PreflightResultSchema } from '../runs/preflight-routes.ts';
import { queueHealth, statusSnapshot } from '../../capabilities/console/status.ts';
import type { AppDeps } from '../deps.ts';

const RefreshQuery = z.strictObject({ refresh_worker: queryBool(false) });

const SafetyFindingSchema = z.object({
  severity: z.enum(['info', 'warning', 'critical']),
  source: z.string().describe('What it is about: queue, worker:<name>, run:<run_id>, queue_item:<project_id>'),
  message: z.string(),
  suggested_action: z.string(),
});

const refreshed = z.array(PreflightResultSchema).optional().describe('With refresh_worker=true: the preflight of every worker');

const StatusSchema = z.object({
  dispatch_safe: z.boolean(),
  dispatch_blockers: z.array(z.string()),
  flags: FlagsSchema,
  live_dispatch_enabled: z.boolean(),
  counts: countsOf(QUEUE_STATUSES)
    .extend({ papers: z.number().int().describe('Every paper'), paper_pipeline: countsOf(PAPER_PIPELINE_COUNTS), queue_total: z.number().int() })
    .describe('Queue items by status, plus papers, the paper-pipeline counts and queue_total'),
  active_items: z.array(QueueItemSchema.extend({ run_state: z.enum(RUN_STATES).nullable() })),
  source_freshness: z.array(
    z.object({ source: z.string(), observed_at: z.string().nullable(), age_sec: z.number().nullable(), stale: z.boolean(), ok: z.boolean().nullable() }),
  ),
  warnings: z.array(SafetyFindingSchema),
  conflicts: z.array(SafetyFindingSchema),
  generated_at: z.string(),
  refreshed,
});
export type StatusDocumented = Assert<Documents<typeof StatusSchema, Awaited<ReturnType<typeof statusSnapshot>>>>;

const QueueHealthSchema = z.object({
  workers: z.array(
    z.object({
      name: z.string(),
      wake_gate_url: z.string(),
      role: z.enum(['gpu_worker', 'cpu_worker']),
      observation: z.object({ observed_at: z.string(), ok: z.boolean(), summary: z.string(), checks: z.array(PreflightCheckSchema) }).nullable(),
      age_sec: z.number().nullable(),
      fresh: z.boolean(),
    }),
  ),
  active_runs: z.array(
    z.object({
      project_id: z.string(),
      status: z.enum(QUEUE_STATUSES),
      run_id: z.string().nullable(),
      state: z.enum(RUN_STATES).nullable(),
      lane: z.string().nullable(),
      started: z.string().nullable(),
      age_sec: z.number().nullable(),
      last_callback_event: z.string().nullable(),
      last_callback_at: z.string().nullable(),
    }),
  ),
  alerts: z.object({
    enabled: z.boolean(),
    channels: z.object({ push: z.boolean(), webhook: z.boolean() }),
    results: z
      .array(
        z.object({
          check_id: z.number().int(),
          trigger: z.string(),
          force_notify: z.boolean(),
          findings: z.array(AlertFindingSchema),
          sent: z.array(z.object({ channel: z.string(), ok: z.boolean(), status: z.number().int().nullable(), error: z.string().optional().describe('Why the channel did not take it') })),
          suppressed_by_cooldown: z.number().int(),
          checked_at: z.string(),
        }),
      )
      .describe('The latest live queue checks, newest first: findings, what each channel answered, how many the cooldown held back'),
  }),
  recent_callbacks: z.array(
    z.object({
      idempotency_key: z.string(),
      run_id: z.string(),
      project_id: z.string(),
      event_type: z.string(),
      ignored: z.boolean(),
      ignore_reason: z.string().nullable(),
      received_at: z.string(),
    }),
  ),
  generated_at: z.string(),
  refreshed,
});
export type QueueHealthDocumented = Assert<Documents<typeof QueueHealthSchema, Awaited<ReturnType<typeof queueHealth>>>>;

const tags = ['status'];

export async function statusRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dispatch' | 'alerts'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const status = { store: deps.store, settings: deps.dispatch };
  const snapshot = {
    tags,
    summary: 'Dispatch-safety snapshot; refresh_worker=true preflights every worker first',
    querystring: RefreshQuery,
    response: { 200: StatusSchema, ...errorResponses(401, 422) },
  };
  app.get('/control/api/status', { config: { auth: 'control' }, schema: snapshot }, async (request) => statusSnapshot(status, request.query));

  const health = {
    tags,
    summary: 'Worker freshness, active runs with their last callback, alerts and recent callbacks',
    querystring: RefreshQuery,
    response: { 200: QueueHealthSchema, ...errorResponses(401, 422) },
  };
  app.get('/control/api/queue-health', { config: { auth: 'control' }, schema: health }, async (request) => queueHealth({ ...status, alerts: deps.alerts }, request.query));
}
