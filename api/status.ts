import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { anyObject, errorResponses, openObject } from '../http/responses.ts';
import { queryBool } from '../http/validation.ts';
import { FlagsSchema } from './answers.ts';
import { queueHealth, statusSnapshot } from '../services/status.ts';
import type { AppDeps } from './deps.ts';

const RefreshQuery = z.strictObject({ refresh_worker: queryBool(false) });

const StatusSchema = openObject({
  dispatch_safe: z.boolean(),
  dispatch_blockers: z.array(z.unknown()),
  flags: FlagsSchema,
  live_dispatch_enabled: z.boolean(),
  counts: anyObject().describe('Queue items by status, plus papers (every paper), paper_pipeline (the five paper-pipeline counts) and queue_total'),
  active_items: z.array(anyObject()),
  source_freshness: z.array(anyObject()),
  warnings: z.array(z.unknown()),
  conflicts: z.array(z.unknown()),
  generated_at: z.string(),
  refreshed: z.array(z.unknown()).optional().describe('With refresh_worker=true: the preflight of every worker'),
});

const QueueHealthSchema = openObject({
  workers: z.array(openObject({ name: z.string(), wake_gate_url: z.string(), fresh: z.boolean() })),
  active_runs: z.array(anyObject()),
  alerts: openObject({
    enabled: z.boolean(),
    channels: openObject({ push: z.boolean(), webhook: z.boolean() }),
    results: z.array(anyObject()).describe('The latest live queue checks, newest first: findings, what each channel answered, how many the cooldown held back'),
  }),
  recent_callbacks: z.array(anyObject()),
  generated_at: z.string(),
  refreshed: z.array(z.unknown()).optional().describe('With refresh_worker=true: the preflight of every worker'),
});

const tags = ['status'];

export async function statusRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
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
