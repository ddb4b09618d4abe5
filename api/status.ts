import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { queryBool } from '../http/validation.ts';
import { queueHealth, statusSnapshot } from '../services/status.ts';
import type { AppDeps } from './deps.ts';

const RefreshQuery = z.strictObject({ refresh_worker: queryBool(false) });

export async function statusRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const status = { store: deps.store, settings: deps.dispatch };
  app.get('/control/api/status', { schema: { querystring: RefreshQuery } }, async (request) =>
    statusSnapshot(status, request.query as z.output<typeof RefreshQuery>),
  );

  app.get('/control/api/queue-health', { schema: { querystring: RefreshQuery } }, async (request) =>
    queueHealth(status, request.query as z.output<typeof RefreshQuery>),
  );
}
