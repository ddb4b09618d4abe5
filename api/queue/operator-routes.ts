import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppDeps } from '../deps.ts';
import { errorResponses } from '../../platform/http/responses.ts';
import { FlagsSchema, QueueItemSchema } from '../runs/run-answers.ts';

/** Operator commands on the queue (docs/runs.md#runs); every change is audited in the same transaction. */

const text = z.string().trim().min(1).max(200);

const PauseBody = z.strictObject({
  reason: text,
  paused_by: text,
  maintenance_mode: z.boolean().default(false),
});

const ResumeBody = z.strictObject({ resumed_by: text });

const MarkPausedBody = z.strictObject({
  project_id: z.string().min(1).max(200),
  reason: text,
  updated_by: text,
});

const RequeueBody = z.strictObject({
  project_id: z.string().min(1).max(200),
  requested_by: text,
});

const FlagsAnswer = z.object({ ok: z.literal(true), flags: FlagsSchema, changed: z.boolean() });
const QueueItemAnswer = z.object({ ok: z.literal(true), changed: z.boolean(), queue_item: QueueItemSchema });

const tags = ['operator'];
const config = { auth: 'control' } as const;

export async function operatorRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'queueOperator'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const operator = deps.queueOperator;
  const flagsCommand = { 200: FlagsAnswer, ...errorResponses(401, 403, 422, 501) };
  const itemCommand = { 200: QueueItemAnswer, ...errorResponses(401, 403, 404, 409, 422, 501) };

  const pause = { tags, summary: 'Pause the queue, optionally with maintenance mode; audited', body: PauseBody, response: flagsCommand };
  app.post('/control/pause', { config, schema: pause }, async (request) => operator.pause(request.body, { request_id: request.id }));

  const resume = { tags, summary: 'Clear the pause flag and maintenance mode; audited', body: ResumeBody, response: flagsCommand };
  app.post('/control/resume', { config, schema: resume }, async (request) => operator.resume(request.body, { request_id: request.id }));

  const markPaused = { tags, summary: 'Park one queue item; audited', body: MarkPausedBody, response: itemCommand };
  app.post('/control/queue/mark-paused', { config, schema: markPaused }, async (request) =>
    operator.markPaused(request.body, { request_id: request.id }),
  );

  const requeue = {
    tags,
    summary: 'Put one item back in the queue (clears the review flag and the failure count); audited',
    body: RequeueBody,
    response: itemCommand,
  };
  app.post('/control/queue/requeue', { config, schema: requeue }, async (request) => operator.requeue(request.body, { request_id: request.id }));
}
