import type { FastifyInstance } from 'fastify';
import { WorkerCallbackSchema, type WorkerCallback } from '../contracts/worker-callback.ts';
import { receiveWorkerCallback } from '../services/worker-callbacks.ts';
import type { AppDeps } from './deps.ts';

export const WORKER_CALLBACK_ROUTE = 'POST /control/api/worker-callback';

export async function workerCallbackRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.post('/control/api/worker-callback', { schema: { body: WorkerCallbackSchema } }, async (request) =>
    receiveWorkerCallback({ store: deps.store, runs: deps.runs, log: request.log }, request.body as WorkerCallback),
  );
}
