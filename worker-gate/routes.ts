import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponses, type Assert, type Documents } from '../platform/http/responses.ts';
import type { dashboardBody } from './dashboard.ts';
import { queryInt } from '../platform/http/validation.ts';
import {
  CancelRunResponseSchema,
  ControlPlaneEventResponseSchema,
  ControlPlaneEventSchema,
  DispatchResponseSchema,
  DispatchSchema,
  GateDashboardSchema,
  GateHealthSchema,
  GateIdentityQuerySchema,
  GateIdentitySchema,
  PrepareProjectResponseSchema,
  PrepareProjectSchema,
  ResumeRunResponseSchema,
  ResumeRunSchema,
  RunIdSchema,
} from './contract/gate-endpoints.ts';
import type { WorkerGate } from './worker-gate.ts';
import { RunFileContentSchema, RunFileQuerySchema, RunFilesSchema } from './contract/run-files.ts';
import { gateIdentityProof } from '../platform/http/tokens.ts';

const RunParamsSchema = z.strictObject({ run_id: RunIdSchema });

const DashboardQuerySchema = z.strictObject({
  limit: queryInt({ min: 1, max: 500, default: 50 }),
  event_limit: queryInt({ min: 1, max: 1000, default: 100 }),
});

export interface WorkerGateRouteOptions {
  gate: WorkerGate;
  /** worker_wake_gate_bearer_token: the key of the gate's identity proof. */
  token: string;
  /** False when the control plane shares the server and answers /healthz for both roles. */
  serveHealthz: boolean;
}

export function workerGateHealth(gate: WorkerGate) {
  return gate.isReady()
    ? { status: 200 as const, body: { ok: true, service: 'worker-gate' as const, ready: true, timestamp: new Date().toISOString() } }
    : { status: 503 as const, body: { ok: false, service: 'worker-gate' as const, ready: false, detail: 'the worker gate is starting' } };
}

const tags = ['worker-gate'];

/**
 * The worker gate's routes (docs/worker-gate.md#worker-gate): its own token guards them, except the agents' event hook, which
 * takes the control API token.
 */
export async function workerGateRoutes(instance: FastifyInstance, { gate, token, serveHealthz }: WorkerGateRouteOptions): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  if (serveHealthz) {
    app.get(
      '/healthz',
      { config: { auth: 'public' }, schema: { tags, summary: 'Liveness of the gate', response: { 200: GateHealthSchema, 503: GateHealthSchema } } },
      async (_request, reply) => {
        const health = workerGateHealth(gate);
        return reply.code(health.status).send(health.body);
      },
    );
  }

  // Public: a caller asks it before sending the token, so that a process that is not this gate never receives it.
  app.get(
    '/gate-identity',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Prove this is the gate holding the caller\'s token: an HMAC of the challenge keyed by it',
        querystring: GateIdentityQuerySchema,
        response: { 200: GateIdentitySchema, ...errorResponses(422) },
      },
    },
    async (request) => ({ service: 'worker-gate' as const, proof: gateIdentityProof(token, request.query.challenge) }),
  );

  app.post(
    '/prepare-project',
    {
      config: { auth: 'gate' },
      schema: {
        tags,
        summary: 'Write the project directory and prompt of a run',
        body: PrepareProjectSchema,
        response: { 200: PrepareProjectResponseSchema, ...errorResponses(400, 401, 409, 422) },
      },
    },
    async (request) => gate.prepare(request.body),
  );

  app.post(
    '/dispatch',
    {
      config: { auth: 'gate' },
      schema: {
        tags,
        summary: 'Start the agent of a prepared run (once per run_id)',
        body: DispatchSchema,
        response: { 200: DispatchResponseSchema, ...errorResponses(400, 401, 409, 422, 502, 504) },
      },
    },
    async (request) => gate.dispatch(request.body),
  );

  app.post(
    '/runs/:run_id/cancel',
    {
      config: { auth: 'gate' },
      schema: {
        tags,
        summary: 'Mark a run cancelled and stop its processes',
        params: RunParamsSchema,
        response: { 200: CancelRunResponseSchema, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => gate.cancel(request.params.run_id),
  );

  app.post(
    '/runs/:run_id/resume',
    {
      config: { auth: 'gate' },
      schema: {
        tags,
        summary: "Start the session of a run whose agent waits on an answer again, with the answer as its prompt (once per resume_id)",
        params: RunParamsSchema,
        body: ResumeRunSchema,
        response: { 200: ResumeRunResponseSchema, ...errorResponses(400, 401, 404, 409, 422, 502, 504) },
      },
    },
    async (request) => gate.resume(request.params.run_id, request.body),
  );

  app.get(
    '/runs/:run_id/files',
    {
      config: { auth: 'gate' },
      schema: {
        tags,
        summary: "The run's result files: run_notes.md, the decision file and results/, with sizes and hashes",
        params: RunParamsSchema,
        response: { 200: RunFilesSchema, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => gate.runFiles(request.params.run_id),
  );

  app.get(
    '/runs/:run_id/files/content',
    {
      config: { auth: 'gate' },
      schema: {
        tags,
        summary: 'One result file of the run, with its preview capped in size',
        params: RunParamsSchema,
        querystring: RunFileQuerySchema,
        response: { 200: RunFileContentSchema, ...errorResponses(400, 401, 404, 409, 422) },
      },
    },
    async (request) => gate.runFile(request.params.run_id, request.query.path),
  );

  app.post(
    '/legacy-agent/event',
    {
      config: { auth: 'agent_event' },
      schema: {
        tags,
        summary: 'Lifecycle event from the agent runtime',
        body: ControlPlaneEventSchema,
        response: { 200: ControlPlaneEventResponseSchema, ...errorResponses(401, 422) },
      },
    },
    async (request) => gate.recordEvent(request.body),
  );

  app.get(
    '/dashboard/api',
    {
      config: { auth: 'gate' },
      schema: {
        tags,
        summary: 'The gate\'s state: service, totals, telemetry, capacity, runs, callbacks and events',
        querystring: DashboardQuerySchema,
        response: { 200: GateDashboardSchema, ...errorResponses(401, 422) },
      },
    },
    async (request) => {
      await gate.readGpusIfUnknown();
      return gate.dashboard(request.query.limit, request.query.event_limit);
    },
  );
}

export type GateDashboardDocumented = Assert<Documents<typeof GateDashboardSchema, ReturnType<typeof dashboardBody>>>;
