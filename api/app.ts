import cookie from '@fastify/cookie';
import type { FastifyInstance } from 'fastify';
import { workerGateRoutes } from '../worker-gate/routes.ts';
import type { WorkerGate } from '../worker-gate/worker-gate.ts';
import { auth } from './auth.ts';
import { dashboardRoutes } from './dashboard.ts';
import type { AppDeps } from './deps.ts';
import { dispatchRoutes } from './dispatch.ts';
import { registerErrorHandling } from '../http/errors.ts';
import { controlPlaneErrorAnswers } from './error-answers.ts';
import { eventRoutes } from './events.ts';
import { healthRoutes } from './health.ts';
import { operatorRoutes } from './operator.ts';
import { preflightRoutes } from './preflight.ts';
import { projectRoutes } from './projects.ts';
import { paperDraftingRoutes } from './paper-drafting.ts';
import { paperRoutes } from './papers.ts';
import { queueRoutes } from './queues.ts';
import { researchRoutes } from './research.ts';
import { runRoutes } from './runs.ts';
import { securityHeaders } from '../http/security-headers.ts';
import { sessionRoutes } from './session.ts';
import { statusRoutes } from './status.ts';
import { refuseNulCharacters, useZodTypeProvider } from '../http/validation.ts';
import { allowedHosts } from '../http/allowed-hosts.ts';
import { registerRateLimits } from '../http/rate-limit.ts';
import { recordRequestDurations, type ServiceMetrics } from '../http/metrics.ts';
import { observeRoutes, type RouteObservability } from '../http/route-observability.ts';
import { registerControlPlaneMetrics } from '../services/service-metrics.ts';
import { registerGateMetrics } from '../worker-gate/gate-metrics.ts';
import { metricsRoute, observabilityRoutes } from './observability.ts';
import { operationalTraceHooks, type OperationalTrace } from '../http/operational-trace.ts';
import { openApiDocument } from './openapi.ts';
import { workerCallbackRoutes } from './worker-callback.ts';

/** The worker gate role served from this process (both roles may share one port, README "Worker gate"). */
export interface WorkerGateRole {
  gate: WorkerGate;
  /** worker_wake_gate_bearer_token: guards the gate's routes of auth kind `gate`. */
  token: string;
}

export interface HttpAppOptions {
  /** Guards the control API; the gate's event hook also takes it, for agents configured by hand. */
  controlApiToken: string;
  controlPlane?: AppDeps;
  workerGate?: WorkerGateRole;
  /** config allowed_hosts: host names this server answers to; empty answers any. */
  allowedHosts?: readonly string[];
  /** operational_trace_enabled: command requests and their answers are recorded here. */
  operationalTrace?: OperationalTrace;
  /** This process's Prometheus registry, served at /metrics. */
  metrics: ServiceMetrics;
  /** route_observability_enabled: every request is written to the route log. */
  routeObservability?: RouteObservability;
  /** route_observability_memory_warn_rss_mib (0: none), reported by /control/api/v1/observability/memory. */
  memoryWarnRssMib?: number;
}

/**
 * The HTTP app as a Fastify plugin, serving the control plane, the worker gate, or both. Register it with
 * fastify-plugin semantics (see create-server.ts) so its hooks and error handling cover the whole server,
 * including unknown routes.
 */
export async function httpApp(app: FastifyInstance, options: HttpAppOptions): Promise<void> {
  const { controlPlane, workerGate } = options;
  useZodTypeProvider(app);
  refuseNulCharacters(app);
  // Command bodies are JSON only; anything else is 415 rather than a string the schema then refuses.
  app.removeContentTypeParser('text/plain');
  registerErrorHandling(app, controlPlaneErrorAnswers);
  if (options.operationalTrace) await app.register(operationalTraceHooks, { trace: options.operationalTrace });
  // Timed before authentication, so refused requests show up in the figures too.
  recordRequestDurations(app, options.metrics);
  if (options.routeObservability) observeRoutes(app, options.routeObservability);
  await app.register(securityHeaders);
  // Before authentication: a request for a host name this server does not answer to learns nothing else.
  await app.register(allowedHosts, { allowedHosts: options.allowedHosts ?? [] });
  if (controlPlane) await app.register(cookie);
  await registerRateLimits(app);
  await app.register(auth, {
    controlApiToken: options.controlApiToken,
    ...(controlPlane ? { store: controlPlane.store } : {}),
    ...(workerGate ? { workerGateToken: workerGate.token, agentRunFor: (token: string) => workerGate.gate.runForAgentToken(token) } : {}),
    ...(controlPlane?.dispatch ? { callbackToken: controlPlane.dispatch.completionCallbackToken } : {}),
  });
  await openApiDocument(app, { controlPlane: controlPlane !== undefined, workerGate: workerGate !== undefined });
  // Where both roles share a port, the operator's control token reads the metrics of both.
  await app.register(metricsRoute, { metrics: options.metrics, auth: controlPlane ? 'control' : 'gate' });
  if (workerGate) registerGateMetrics(options.metrics, workerGate.gate);

  if (controlPlane) {
    registerControlPlaneMetrics(options.metrics, controlPlane.store);
    await app.register(observabilityRoutes, {
      ...(options.routeObservability ? { routes: options.routeObservability } : {}),
      memoryWarnRssMib: options.memoryWarnRssMib ?? 0,
    });
    await app.register(healthRoutes, controlPlane);
    await app.register(eventRoutes, controlPlane);
    await app.register(sessionRoutes, controlPlane);
    await app.register(researchRoutes, controlPlane);
    await app.register(queueRoutes, controlPlane);
    await app.register(statusRoutes, controlPlane);
    await app.register(operatorRoutes, controlPlane);
    await app.register(preflightRoutes, controlPlane);
    await app.register(dispatchRoutes, controlPlane);
    await app.register(workerCallbackRoutes, controlPlane);
    await app.register(runRoutes, controlPlane);
    await app.register(projectRoutes, controlPlane);
    await app.register(paperRoutes, controlPlane);
    await app.register(paperDraftingRoutes, controlPlane);
    await app.register(dashboardRoutes);
  }
  if (workerGate) await app.register(workerGateRoutes, { gate: workerGate.gate, serveHealthz: !controlPlane });
}
