import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { dispatchNext } from '../services/dispatch.ts';
import type { AppDeps } from './deps.ts';

const DispatchNextBody = z.strictObject({
  dry_run: z.boolean().default(true),
  requested_by: z.string().trim().min(1).max(200),
  force_preflight: z.boolean().default(false),
});

export async function dispatchRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const dispatch = { store: deps.store, settings: deps.dispatch, runs: deps.runs };
  app.post('/control/dispatch-next', { schema: { body: DispatchNextBody } }, async (request) =>
    dispatchNext(dispatch, request.body as z.output<typeof DispatchNextBody>),
  );
}
