import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { READINESS_CRITERIA } from '../../capabilities/automation/domain/readiness-rules.ts';
import { ACTION_REASONS, OPERATOR_LANES } from '../../capabilities/console/domain/operator-lanes.ts';
import { PAPER_PIPELINE_COUNTS } from '../../capabilities/papers/domain/paper-candidacy.ts';
import { PAPER_STATUSES, REVIEW_STATUSES } from '../../capabilities/papers/domain/paper-status.ts';
import { QUEUE_GROUPS, QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';
import { RUN_STATES } from '../../capabilities/runs/domain/run-state.ts';
import { countsOf, errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { queryBool, queryInt } from '../../platform/http/validation.ts';
import { readAutomationReadiness } from '../../capabilities/automation/automation-readiness.ts';
import { readLanesWithWindows } from '../../capabilities/runs/lanes.ts';
import { QuietWindowViewSchema } from '../runs/run-routes.ts';
import { readOverviewWithWaits } from '../../capabilities/console/overview.ts';
import { AuditEventSchema } from '../audit-event-answer.ts';
import { PaperSchema } from '../papers/paper-answers.ts';
import { DispatchRouteSchema, QueueItemSchema } from '../runs/run-answers.ts';
import type { AppDeps } from '../deps.ts';

const OverviewQuery = z.strictObject({
  active_limit: queryInt({ min: 1, max: 100, default: 10 }),
  event_limit: queryInt({ min: 1, max: 100, default: 20 }),
});

const OverviewQueueItemSchema = QueueItemSchema.pick({
  project_id: true,
  project_name: true,
  status: true,
  manual_review_required: true,
  current_run_id: true,
  lane: true,
  last_error: true,
  updated_at: true,
}).extend({ question: z.string().nullable().describe("The question its run's agent waits on, for the operator to answer on the run's page; null when none waits") });
const OverviewPaperSchema = PaperSchema.pick({ paper_id: true, project_id: true, run_id: true, title: true, paper_status: true, review_status: true, rank_score: true, updated_at: true });
const actionable = { reason: z.enum(ACTION_REASONS), hint: z.string(), since: z.string() };

const OverviewAnswer = z.object({
  operator_counts: countsOf(OPERATOR_LANES),
  operator_detail_counts: z.object({
    attention: countsOf(
      ACTION_REASONS.filter((reason) => reason !== 'paper_import' && reason !== 'quiet_window_overdue') as Exclude<(typeof ACTION_REASONS)[number], 'paper_import' | 'quiet_window_overdue'>[],
    ),
    running: z.partialRecord(z.enum(QUEUE_STATUSES), z.number().int()).describe('Items in the running lane by status; statuses with none are left out'),
    queue: z.object({ by_status: countsOf(QUEUE_STATUSES), by_group: countsOf(QUEUE_GROUPS), manual_review_required: z.number().int() }),
    runs: z.object({ by_state: z.partialRecord(z.enum(RUN_STATES), z.number().int()).describe('Runs by state; states with none are left out') }),
    papers: z.object({ total: z.number().int(), by_paper_status: countsOf(PAPER_STATUSES), by_review_status: countsOf(REVIEW_STATUSES) }),
  }),
  paper_pipeline: countsOf(PAPER_PIPELINE_COUNTS),
  actionable_items: z.array(
    z.discriminatedUnion('kind', [
      OverviewQueueItemSchema.extend({ kind: z.literal('queue_item'), ...actionable }),
      OverviewPaperSchema.extend({ kind: z.literal('paper'), ...actionable }),
    ]),
  ),
  active_items: z.array(OverviewQueueItemSchema),
  recent_events: z.array(AuditEventSchema),
  links: z.object({ observability_health: z.string(), observability_memory: z.string() }),
});
export type OverviewDocumented = Assert<Documents<typeof OverviewAnswer, Awaited<ReturnType<typeof readOverviewWithWaits>>>>;

const LanesAnswer = z.object({
  dispatch: z.object({ queue_paused: z.boolean(), maintenance_mode: z.boolean(), live_dispatch_enabled: z.boolean() }),
  lanes: z.array(
    z.object({
      lane: z.string(),
      configured: z.boolean(),
      route: DispatchRouteSchema
        .nullable()
        .describe('The worker target and this slot of it; null for a lane no longer configured'),
      idle: z.boolean(),
      active: z
        .object({
          item: QueueItemSchema.extend({ lane: z.string() }),
          run: z
            .object({
              run_id: z.string(),
              state: z.string().nullable(),
              created_at: z.string().nullable(),
              gpu_indices: z.array(z.number().int()).nullable().describe('The GPUs the run holds ([]: none visible to it); null: not pinned'),
              cpu_count: z.number().int().nullable().describe('How many CPUs its gate pins it to; null: not pinned'),
              quiet_window: QuietWindowViewSchema.nullable().describe("The run's quiet window as its gate judges it now; null before it is judged, once the run finished, or when the gate cannot be asked within 2 s"),
            })
            .nullable(),
          last_callback: z.object({ event_type: z.string(), gate_state: z.string().nullable(), received_at: z.string() }).nullable(),
        })
        .nullable(),
      next_candidate: QueueItemSchema.nullable().describe('The item dispatch-next would pick for this lane next'),
      counts: z.object({
        claimed_by_status: z.partialRecord(z.enum(QUEUE_STATUSES), z.number().int()).describe('Items claimed on this lane by status; statuses with none are left out'),
        eligible_queued: z.number().int(),
      }),
    }),
  ),
  truncated: z.boolean(),
});
export type LanesDocumented = Assert<Documents<typeof LanesAnswer, Awaited<ReturnType<typeof readLanesWithWindows>>>>;

const CriterionSchema = z.object({ criterion: z.enum(READINESS_CRITERIA), ok: z.boolean(), checked: z.boolean(), detail: z.string() });
const ReadinessAnswer = z.object({
  status: z.enum(['READY', 'BLOCKED']),
  first_failing: CriterionSchema.nullable(),
  criteria: z.array(CriterionSchema),
  checked_at: z.string(),
});

export async function v1OverviewRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dispatch' | 'temporalHealth' | 'researchProvider'>): Promise<void> {
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
    async (request) => readOverviewWithWaits(deps.store.reads, deps.dispatch, request.query),
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
    async () => readLanesWithWindows(deps.store.reads, deps.dispatch),
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
