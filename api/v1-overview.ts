import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { READINESS_CRITERIA } from '../domain/automation-readiness.ts';
import { OPERATOR_LANES } from '../domain/operator-lanes.ts';
import { PAPER_PIPELINE_COUNTS } from '../domain/paper-candidacy.ts';
import { anyObject, errorResponses, openObject } from '../http/responses.ts';
import { queryBool, queryInt } from '../http/validation.ts';
import { readAutomationReadiness } from '../services/automation-readiness.ts';
import { readLanes } from '../services/lanes.ts';
import { readOverview } from '../services/overview.ts';
import { AuditEventSchema } from './answers.ts';
import type { AppDeps } from './deps.ts';

const OverviewQuery = z.strictObject({
  active_limit: queryInt({ min: 1, max: 100, default: 10 }),
  event_limit: queryInt({ min: 1, max: 100, default: 20 }),
});

const counts = (names: readonly string[]) => openObject(Object.fromEntries(names.map((name) => [name, z.number().int()])));

const OverviewAnswer = openObject({
  operator_counts: counts(OPERATOR_LANES),
  operator_detail_counts: anyObject(),
  paper_pipeline: counts(PAPER_PIPELINE_COUNTS),
  actionable_items: z.array(openObject({ kind: z.enum(['queue_item', 'paper']), reason: z.string(), hint: z.string(), since: z.string() })),
  active_items: z.array(anyObject()),
  recent_events: z.array(AuditEventSchema),
  links: openObject({ observability_health: z.string(), observability_memory: z.string() }),
});

const LanesAnswer = openObject({
  dispatch: openObject({ queue_paused: z.boolean(), maintenance_mode: z.boolean(), live_dispatch_enabled: z.boolean() }),
  lanes: z.array(
    openObject({
      lane: z.string(),
      configured: z.boolean(),
      route: anyObject().nullable(),
      idle: z.boolean(),
      active: anyObject().nullable(),
      next_candidate: anyObject().nullable(),
      counts: openObject({ claimed_by_status: anyObject(), eligible_queued: z.number().int() }),
    }),
  ),
  truncated: z.boolean(),
});

const CriterionSchema = openObject({ criterion: z.enum(READINESS_CRITERIA), ok: z.boolean(), checked: z.boolean(), detail: z.string() });
const ReadinessAnswer = openObject({
  status: z.enum(['READY', 'BLOCKED']),
  first_failing: CriterionSchema.nullable(),
  criteria: z.array(CriterionSchema),
  checked_at: z.string(),
});

export async function v1OverviewRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/control/api/v1/overview',
    {
      config: { auth: 'control' },
      schema: {
        tags: ['read models'],
        summary: 'Operator overview: the five lane counts and their drill-down, the paper pipeline, what needs a person first, active items, recent events',
        querystring: OverviewQuery,
        response: { 200: OverviewAnswer, ...errorResponses(401, 422, 503) },
      },
    },
    async (request) => readOverview(deps.store.reads, request.query),
  );

  app.get(
    '/control/api/v1/lanes',
    {
      config: { auth: 'control' },
      schema: {
        tags: ['read models'],
        summary: 'One entry per worker lane: its route, the item in flight and its run, the item dispatch-next would pick for it next, counts',
        querystring: z.strictObject({}),
        response: { 200: LanesAnswer, ...errorResponses(401, 422, 503) },
      },
    },
    async () => readLanes(deps.store.reads, deps.dispatch),
  );

  app.get(
    '/control/api/v1/automation-readiness',
    {
      config: { auth: 'control' },
      schema: {
        tags: ['read models'],
        summary: 'READY, or BLOCKED with the first failing criterion, and every criterion checked; refresh_worker=true preflights every worker first',
        querystring: z.strictObject({ refresh_worker: queryBool(false) }),
        response: { 200: ReadinessAnswer, ...errorResponses(401, 422) },
      },
    },
    async (request) =>
      readAutomationReadiness(
        { store: deps.store, settings: deps.dispatch, researchProvider: deps.researchProvider, ...(deps.temporalHealth ? { temporalHealth: deps.temporalHealth } : {}) },
        request.query,
      ),
  );
}
