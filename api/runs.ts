import { TokenUsageSchema } from '../contracts/worker-callback.ts';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { anyObject, errorResponses, openObject } from '../http/responses.ts';
import { queryInt } from '../http/validation.ts';
import { AuditEventSchema, PaperSchema } from './answers.ts';
import { cancelRun, runDetail } from '../services/runs.ts';
import type { AppDeps } from './deps.ts';

const RunParams = z.strictObject({ run_id: z.string().min(1).max(200) });
const CancelBody = z
  .strictObject({
    requested_by: z.string().trim().min(1).max(200).default('operator'),
    reason: z.string().trim().min(1).max(2000).optional(),
  })
  .default({ requested_by: 'operator' });

const RunDetailQuery = z.strictObject({ event_limit: queryInt({ min: 1, max: 200, default: 50 }) });

const RunDetailAnswer = openObject({
  run: openObject({
    run_id: z.string(),
    project_id: z.string(),
    state: z.string(),
    token_usage: TokenUsageSchema.nullable().describe("The agent's tokens as the worker last reported them; null when it reported none"),
    transitions: z.array(anyObject()),
  }),
  finished: z.boolean().describe('The run is in a final state: cancel would answer already_finished'),
  callbacks: z
    .array(
      openObject({
        idempotency_key: z.string(),
        event_type: z.string(),
        gate_state: z.string().nullable(),
        reason: z.string().nullable(),
        ignored: z.boolean(),
        ignore_reason: z.string().nullable(),
        received_at: z.string(),
      }),
    )
    .describe('The worker\'s completion callbacks for this run, newest first (at most 50)'),
  project: anyObject().nullable(),
  papers: z.array(PaperSchema),
  events: z.array(AuditEventSchema),
  temporal: openObject({ workflow_id: z.string(), ui_url: z.string().nullable() }),
});

const CancelAnswer = openObject({
  ok: z.literal(true),
  run_id: z.string(),
  workflow_id: z.string(),
  already_finished: z.boolean().describe('The run had finished: nothing was canceled'),
  canceled: z.boolean().optional(),
  state: z.string(),
  queue_status: z.string().nullable(),
});

const CancelPendingAnswer = openObject({
  ok: z.literal(true),
  cancel_requested: z.literal(true),
  run_id: z.string(),
  workflow_id: z.string(),
}).describe('Cancellation requested; the workflow has not recorded it yet');

const tags = ['runs'];
const config = { auth: 'control' } as const;

export async function runRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const runs = { store: deps.store, runs: deps.runs };

  const detail = {
    tags,
    summary: 'One run with its transitions, its worker callbacks, its project, recent events and its Temporal workflow',
    params: RunParams,
    querystring: RunDetailQuery,
    response: { 200: RunDetailAnswer, ...errorResponses(401, 404, 422) },
  };
  app.get('/control/api/v1/runs/:run_id', { config, schema: detail }, async (request) =>
    runDetail(runs, request.params.run_id, request.query.event_limit),
  );

  const cancel = {
    tags,
    summary: 'Cancel a run\'s workflow (idempotent); 202 while the workflow has not yet recorded it',
    params: RunParams,
    body: CancelBody,
    response: { 200: CancelAnswer, 202: CancelPendingAnswer, ...errorResponses(401, 403, 404, 422, 501, 503) },
  };
  app.post('/control/api/runs/:run_id/cancel', { config, schema: cancel }, async (request, reply) => {
    const runId = request.params.run_id;
    const body = request.body;
    const result = await cancelRun(runs, { run_id: runId, ...body, request_id: request.id });
    if ('pending' in result) {
      const { pending: _pending, ...answer } = result;
      return reply.code(202).send(answer);
    }
    return result;
  });
}
