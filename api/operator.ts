import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { createQueueOperator } from '../services/queue-operator.ts';
import type { AppDeps } from './deps.ts';

/** Operator commands on the queue (decisions §3); every change is audited in the same transaction. */

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

export async function operatorRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const operator = createQueueOperator(deps.store);

  app.post('/control/pause', { schema: { body: PauseBody } }, async (request) =>
    operator.pause(request.body as z.output<typeof PauseBody>, { request_id: request.id }),
  );

  app.post('/control/resume', { schema: { body: ResumeBody } }, async (request) =>
    operator.resume(request.body as z.output<typeof ResumeBody>, { request_id: request.id }),
  );

  app.post('/control/queue/mark-paused', { schema: { body: MarkPausedBody } }, async (request) =>
    operator.markPaused(request.body as z.output<typeof MarkPausedBody>, { request_id: request.id }),
  );

  app.post('/control/queue/requeue', { schema: { body: RequeueBody } }, async (request) =>
    operator.requeue(request.body as z.output<typeof RequeueBody>, { request_id: request.id }),
  );
}
