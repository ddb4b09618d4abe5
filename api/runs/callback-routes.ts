import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { WorkerCallbackResponseSchema, WorkerCallbackSchema } from '../../worker-gate/contract/callback-body.ts';
import { errorResponses } from '../../platform/http/responses.ts';
import { receiveWorkerCallback } from '../../capabilities/runs/worker-callbacks.ts';
import { IdempotencyConflictError } from '../../platform/store/idempotency-keys.ts';
import type { AppDeps } from '../deps.ts';

/** Completion callbacks from the worker gates, deduplicated by idempotency_key (docs/runs.md#runs). */
export async function workerCallbackRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'runs' | 'metrics'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const schema = {
    tags: ['runs'],
    summary: 'A worker gate\'s completion callback; a redelivery answers the first answer',
    body: WorkerCallbackSchema,
    response: { 200: WorkerCallbackResponseSchema, ...errorResponses(401, 403, 409, 422, 501, 503) },
  };
  app.post('/control/api/worker-callback', { config: { auth: 'callback' }, schema }, async (request) => {
    try {
      const answer = await receiveWorkerCallback({ store: deps.store, runs: deps.runs, log: request.log }, request.body);
      deps.metrics.workerCallbacks.inc({ outcome: answer.ignored ? 'ignored' : 'accepted' });
      return answer;
    } catch (error) {
      deps.metrics.workerCallbacks.inc({ outcome: error instanceof IdempotencyConflictError ? 'conflicting' : 'refused' });
      throw error;
    }
  });
}
