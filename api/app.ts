import cookie from '@fastify/cookie';
import type { FastifyInstance } from 'fastify';
import { workerGateRoutes } from '../worker-gate/routes.ts';
import type { WorkerGate } from '../worker-gate/worker-gate.ts';
import { auth, awaitingOwnRun } from './auth.ts';
import type { AppDeps } from './deps.ts';
import { registerErrorHandling } from '../platform/http/errors.ts';
import { controlPlaneErrorAnswers } from './error-answers.ts';
import { securityHeaders } from '../platform/http/security-headers.ts';
import { refuseUndescribedInput, refuseUnstorableText, useZodTypeProvider } from '../platform/http/validation.ts';
import { allowedHosts } from '../platform/http/allowed-hosts.ts';
import { recordRequestDurations, type ServiceMetrics } from '../platform/http/metrics.ts';
import { observeRoutes, type RouteObservability } from '../platform/observability/route-observability.ts';
import { registerGateMetrics } from '../worker-gate/gate-metrics.ts';
import { metricsRoute } from './observability.ts';
import { operationalTraceHooks, type OperationalTrace } from '../platform/observability/operational-trace.ts';
import { openApiDocument } from './openapi.ts';
import { documentGlobalAnswers } from './global-answers.ts';

/** The worker gate role served from this process (both roles may share one port, docs/worker-gate.md#worker-gate). */
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
  /** Check every answer against its response schema before it is sent (docs/http.md#http-conventions, answers). */
  checkAnswers?: boolean;
}

/**
 * The HTTP app as a Fastify plugin, serving the control plane, the worker gate, or both. Register it with
 * fastify-plugin semantics (see create-server.ts) so its hooks and error handling cover the whole server,
 * including unknown routes.
 */
export async function httpApp(app: FastifyInstance, options: HttpAppOptions): Promise<void> {
  const { controlPlane, workerGate } = options;
  useZodTypeProvider(app, { checkAnswers: options.checkAnswers ?? false });
  refuseUndescribedInput(app);
  documentGlobalAnswers(app);
  // Command bodies are JSON only; anything else is 415 rather than a string the schema then refuses.
  app.removeContentTypeParser('text/plain');
  registerErrorHandling(app, controlPlaneErrorAnswers, awaitingOwnRun);
  if (options.operationalTrace) await app.register(operationalTraceHooks, { trace: options.operationalTrace });
  // Timed before authentication, so refused requests show up in the figures too.
  recordRequestDurations(app, options.metrics);
  if (options.routeObservability) observeRoutes(app, options.routeObservability);
  await app.register(securityHeaders);
  // Before authentication: a request for a host name this server does not answer to learns nothing else.
  await app.register(allowedHosts, { allowedHosts: options.allowedHosts ?? [] });
  if (controlPlane) await app.register(cookie);
  await app.register(auth, {
    controlApiToken: options.controlApiToken,
    ...(controlPlane ? { store: controlPlane.store } : {}),
    ...(workerGate ? { workerGateToken: workerGate.token, agentRunFor: (token: string) => workerGate.gate.runForAgentToken(token) } : {}),
    ...(controlPlane?.dispatch ? { callbackToken: controlPlane.dispatch.completionCallbackToken } : {}),
  });
  // After authentication, whose own body check (an agent's token names its run there) must come first: another
  // run's token is 401 whatever its body holds.
  refuseUnstorableText(app);
  await openApiDocument(app, { controlPlane: controlPlane !== undefined, workerGate: workerGate !== undefined });
  // Where both roles share a port, the operator's control token reads the metrics of both.
  await app.register(metricsRoute, { metrics: options.metrics, auth: controlPlane ? 'control' : 'gate' });
  if (workerGate) registerGateMetrics(options.metrics, workerGate.gate);

  if (controlPlane) {
    // Loaded only here, so a gate-only process never loads the control plane's routes and services.
    const { controlPlaneRoutes } = await import('./control-plane-routes.ts');
    await controlPlaneRoutes(app, {
      deps: controlPlane,
      metrics: options.metrics,
      ...(options.routeObservability ? { routeObservability: options.routeObservability } : {}),
      memoryWarnRssMib: options.memoryWarnRssMib ?? 0,
    });
  }
  if (workerGate) await app.register(workerGateRoutes, { gate: workerGate.gate, token: workerGate.token, serveHealthz: !controlPlane });
}
