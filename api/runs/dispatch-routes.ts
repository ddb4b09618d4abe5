import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AGENT_NAME_PATTERN, AGENT_NAME_RULE, DISPATCH_MODES, REASONING_EFFORTS } from '../../worker-gate/contract/gate-names.ts';
import { dispatchNext } from '../../capabilities/runs/dispatch.ts';
import { DISPATCH_ACTIONS } from '../../capabilities/runs/dispatch-answer.ts';
import type { AppDeps } from '../deps.ts';
import { errorResponses, foreignObject } from '../../platform/http/responses.ts';
import { DispatchRouteSchema, GATE_ANSWER, QueueItemSchema } from './run-answers.ts';
import { PreflightResultSchema } from './preflight-routes.ts';
import { idempotencyKey } from '../command-fields.ts';

const DispatchNextBody = z.strictObject({
  dry_run: z.boolean().default(true),
  requested_by: z.string().trim().min(1).max(200),
  force_preflight: z.boolean().default(false),
  project_id: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe('The queue item to dispatch instead of the next in dispatch order: it must be queued and unflagged and fit an idle lane of its worker target, else the answer is a noop saying why; an unknown project answers 404'),
  agent: z
    .strictObject({
      model: z.string().regex(AGENT_NAME_PATTERN, AGENT_NAME_RULE).optional(),
      reasoning_effort: z.enum(REASONING_EFFORTS).optional(),
      sandbox: z.string().regex(AGENT_NAME_PATTERN, AGENT_NAME_RULE).optional(),
    })
    .optional()
    .describe('This call\'s agent settings, over agent_model, agent_reasoning_effort and agent_sandbox'),
  idempotency_key: idempotencyKey
    .optional()
    .describe('A live call\'s key: the same key with the same body answers the first call\'s answer and starts no second run (a retry after a dropped connection or a 504 attaches to the run); a different body answers 409. Ignored by a dry run.'),
});

const DispatchNextAnswer = z.object({
  ok: z.boolean().describe('True for dry_run_dispatch and live_dispatch'),
  action: z.enum(DISPATCH_ACTIONS),
  reason: z.string(),
  dry_run: z.boolean(),
  live_dispatch_enabled: z.boolean(),
  active_count: z.number().int(),
  candidate: QueueItemSchema.pick({
    project_id: true,
    project_name: true,
    status: true,
    dispatch_priority: true,
    selection_rank: true,
    machine_target: true,
    workload_class: true,
    dispatch_failures: true,
    gpu_count: true,
    gpu_memory_mib: true,
    cpu_count: true,
    updated_at: true,
  })
    .nullable()
    .optional()
    .describe('The queue item chosen; null when none was'),
  dispatch_route: DispatchRouteSchema
    .nullable()
    .optional()
    .describe('The worker target chosen; null when none was'),
  placement: z
    .object({
      needs: z
        .object({ gpu_count: z.number().int(), gpu_memory_mib: z.number().int(), cpu_count: z.number().int().nullable() })
        .describe("What the run needs: the item's own figures, else its workload class's defaults (workload_run_needs)"),
      gpu_indices: z.array(z.number().int()).nullable().describe("The GPUs it would be placed on ([]: none visible to it); null: not pinned"),
      cpu_count: z.number().int().nullable(),
      reason: z.string().describe('Where and why, in words'),
    })
    .optional()
    .describe('A dry run: where on its worker the run would go (docs/runs.md#slots-and-gpus); the claim decides again when it runs'),
  run_id: z.string().optional(),
  workflow_id: z.string().optional(),
  agent: z
    .object({ mode: z.enum(DISPATCH_MODES), model: z.string(), reasoning_effort: z.enum(REASONING_EFFORTS), sandbox: z.string() })
    .optional()
    .describe('What the agent is (or would be) started with; an empty model or sandbox leaves the runtime\'s own default'),
  preflight: PreflightResultSchema.optional(),
  prepare: foreignObject(`The gate's answer to /prepare-project, on a live dispatch. ${GATE_ANSWER}`).optional(),
  dispatch: foreignObject(`The gate's answer to /dispatch, on a live dispatch. ${GATE_ANSWER}`).optional(),
});

export async function dispatchRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dispatch' | 'runs' | 'metrics'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const dispatch = { store: deps.store, settings: deps.dispatch, runs: deps.runs, log: instance.log };
  const schema = {
    tags: ['dispatch'],
    summary: 'What would be dispatched where (dry run, the default), or a live dispatch',
    body: DispatchNextBody,
    response: { 200: DispatchNextAnswer, ...errorResponses(401, 403, 404, 409, 422, 501, 502, 503, 504) },
  };
  app.post('/control/dispatch-next', { config: { auth: 'control' }, schema }, async (request) => {
    const started = performance.now();
    const live = request.body.dry_run === false;
    const observe = (action: string) => {
      deps.metrics.dispatchOutcomes.inc({ action });
      if (live) deps.metrics.liveDispatchDuration.observe({ outcome: action }, (performance.now() - started) / 1000);
    };
    try {
      const answer = await dispatchNext(dispatch, request.body);
      observe(answer.action);
      return answer;
    } catch (error) {
      observe('failed');
      throw error;
    }
  });
}
