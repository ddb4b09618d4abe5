import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { queryInt } from '../http/validation.ts';
import { ControlPlaneEventSchema, DispatchSchema, PrepareProjectSchema, RunIdSchema } from '../contracts/worker-gate.ts';
import type { WorkerGate } from './worker-gate.ts';

/** Paths of the gate that take the worker gate's bearer token (decisions §5); the event hook takes the control API token. */
const GATE_TOKEN_ROUTES: ReadonlySet<string> = new Set(['POST /prepare-project', 'POST /dispatch', 'GET /dashboard/api']);
const RUN_CANCEL_ROUTE = /^POST \/runs\/[^/]+\/cancel$/;

/** `<METHOD> <path>` of a request the gate's own token guards. */
export function isGateTokenRoute(route: string): boolean {
  return GATE_TOKEN_ROUTES.has(route) || RUN_CANCEL_ROUTE.test(route);
}
export const AGENT_EVENT_ROUTE = 'POST /legacy-agent/event';

const RunParamsSchema = z.strictObject({ run_id: RunIdSchema });

const DashboardQuerySchema = z.strictObject({
  limit: queryInt({ min: 1, max: 500, default: 50 }),
  event_limit: queryInt({ min: 1, max: 1000, default: 100 }),
});

export interface WorkerGateRouteOptions {
  gate: WorkerGate;
  /** False when the control plane shares the server and answers /healthz for both roles. */
  serveHealthz: boolean;
}

export function workerGateHealth(gate: WorkerGate) {
  return gate.isReady()
    ? { status: 200, body: { ok: true, service: 'worker-gate', ready: true, timestamp: new Date().toISOString() } }
    : { status: 503, body: { ok: false, service: 'worker-gate', ready: false, detail: 'the worker gate is starting' } };
}

export async function workerGateRoutes(app: FastifyInstance, { gate, serveHealthz }: WorkerGateRouteOptions): Promise<void> {
  if (serveHealthz) {
    app.get('/healthz', async (_request, reply) => {
      const health = workerGateHealth(gate);
      return reply.code(health.status).send(health.body);
    });
  }

  app.post('/prepare-project', { schema: { body: PrepareProjectSchema } }, async (request) =>
    gate.prepare(request.body as z.output<typeof PrepareProjectSchema>),
  );

  app.post('/dispatch', { schema: { body: DispatchSchema } }, async (request) =>
    gate.dispatch(request.body as z.output<typeof DispatchSchema>),
  );

  app.post('/runs/:run_id/cancel', { schema: { params: RunParamsSchema } }, async (request) =>
    gate.cancel((request.params as z.output<typeof RunParamsSchema>).run_id),
  );

  app.post('/legacy-agent/event', { schema: { body: ControlPlaneEventSchema } }, async (request) =>
    gate.recordEvent(request.body as z.output<typeof ControlPlaneEventSchema>),
  );

  app.get('/dashboard/api', { schema: { querystring: DashboardQuerySchema } }, async (request) => {
    const query = request.query as z.output<typeof DashboardQuerySchema>;
    return gate.dashboard(query.limit, query.event_limit);
  });
}
