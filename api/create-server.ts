import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { enterRequest } from '../platform/store/request-context.ts';
import { httpApp, type HttpAppOptions, type WorkerGateRole } from './app.ts';
import type { AuthKind } from './auth.ts';
import type { AppDeps } from './deps.ts';
import { answerClientError } from '../platform/http/client-errors.ts';
import { closeConnectionsWithoutRequest, limitConnectionsPerClient } from '../platform/http/connection-limits.ts';
import { answerRoutingError, BODY_LIMIT_BYTES } from '../platform/http/errors.ts';
import type { OperationalTrace } from '../platform/observability/operational-trace.ts';
import { ServiceMetrics } from '../platform/http/metrics.ts';
import type { RouteObservability } from '../platform/observability/route-observability.ts';

const INCOMING_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** How long a server that is closing lets requests in flight finish before it closes their connections. */
export const SHUTDOWN_DRAIN_GRACE_MS = 5_000;
const DROP_WARNING_EVERY_MS = 60_000;

/**
 * Bounds on what one client can hold (docs/http.md#http-conventions); from http_request_timeout_sec, http_max_connections
 * and http_max_connections_per_address.
 */
export interface HttpLimits {
  requestTimeoutMs: number;
  maxConnections: number;
  /** Open connections one client address (IPv6: one /64) may hold; at most maxConnections. */
  maxConnectionsPerAddress: number;
  /** How long a new connection may take to deliver its first request's headers (firstRequestTimeoutMs()). */
  firstRequestTimeoutMs: number;
}

const FIRST_REQUEST_TIMEOUT_MS = 10_000;

/**
 * The first-request deadline: 10 s, or the request timeout when that is shorter. A client sends its request as soon
 * as it has connected; a third of the default request timeout cuts an idle connection's hold on its slot threefold.
 */
export const firstRequestTimeoutMs = (requestTimeoutMs: number): number => Math.min(FIRST_REQUEST_TIMEOUT_MS, requestTimeoutMs);

/** The config's defaults, for servers built without a config (tests, benchmarks). */
export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  requestTimeoutMs: 30_000,
  maxConnections: 256,
  maxConnectionsPerAddress: 128,
  firstRequestTimeoutMs: FIRST_REQUEST_TIMEOUT_MS,
};

export interface RegisteredRoute {
  method: string;
  url: string;
  /** Who may call it (docs/http.md#http-conventions). */
  auth: AuthKind | undefined;
}

export interface CreateServerOptions {
  /** Called for every route as it is registered (the auth tests walk the whole table). */
  onRoute?: (route: RegisteredRoute) => void;
  /** Also serve the worker gate role on this server. */
  workerGate?: WorkerGateRole;
  /** config allowed_hosts: host names this server answers to (docs/http.md#http-conventions); empty or absent answers any. */
  allowedHosts?: readonly string[];
  limits?: HttpLimits;
  /** operational_trace_enabled: the trace command requests are recorded in. */
  operationalTrace?: OperationalTrace;
  /** route_observability_enabled: the route log every request is written to. */
  routeObservability?: RouteObservability;
  /** route_observability_memory_warn_rss_mib. */
  memoryWarnRssMib?: number;
  /** The gate alone: its Prometheus registry (the control plane's is in its deps); a new one when absent. */
  metrics?: ServiceMetrics;
  /**
   * Check every answer against its response schema before it is sent, failing it with 500 where it does not match
   * (docs/http.md#http-conventions, answers): on in the tests and with RCP_CHECK_ANSWERS=1, off in service.
   */
  checkAnswers?: boolean;
}

/**
 * Node checks request deadlines on a timer, not per request, so a deadline is only noticed on the next tick. Checking
 * four times per limit (at most every second) and cutting one tick early answers 408 within the limit itself.
 */
function requestTimeouts(limitMs: number): { requestTimeout: number; connectionsCheckingInterval: number } {
  const connectionsCheckingInterval = Math.min(1_000, Math.floor(limitMs / 4));
  return { requestTimeout: limitMs - connectionsCheckingInterval, connectionsCheckingInterval };
}

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The request log (docs/http.md#http-conventions, request log): a read that succeeded is logged at debug, everything else
 * (a write, a refusal, a failure) at info. Dashboards and scripts poll the read routes every few seconds, and a line
 * per poll would bury the writes and errors an operator looks for; the metrics count every request either way.
 */
function requestLogLevel(method: string, status: number): 'debug' | 'info' {
  return READ_METHODS.has(method) && status < 400 ? 'debug' : 'info';
}

async function buildServer(appOptions: HttpAppOptions, logger: Logger, options: CreateServerOptions): Promise<FastifyInstance> {
  const limits = options.limits ?? DEFAULT_HTTP_LIMITS;
  const { requestTimeout, connectionsCheckingInterval } = requestTimeouts(limits.requestTimeoutMs);
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: false,
    genReqId: (request) => {
      const incoming = request.headers['x-request-id'];
      return typeof incoming === 'string' && INCOMING_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    forceCloseConnections: 'idle',
    // The whole request, headers included, must arrive within the limit: a stalled body or a connection that sends
    // nothing gets 408 and is closed (Fastify's own default is no limit at all).
    requestTimeout,
    http: { requestTimeout, headersTimeout: requestTimeout, connectionsCheckingInterval },
    clientErrorHandler: answerClientError,
    frameworkErrors: answerRoutingError,
    // One log line per request (in onResponse below) instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    // Path ids (project, run, candidate) may be up to 200 characters; their own schemas answer 422 beyond that.
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 512 },
  });
  if (options.onRoute) {
    const onRoute = options.onRoute;
    app.addHook('onRoute', (route) => {
      for (const method of [route.method].flat()) onRoute({ method, url: route.url, auth: route.config?.auth });
    });
  }
  // Everything the request's handling does runs as done for its id: audit rows, and the workflows it starts.
  app.addHook('onRequest', (request, _reply, done) => {
    enterRequest(request.id);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const level = requestLogLevel(request.method, reply.statusCode);
    request.log[level]({ req: request, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 }, 'request completed');
    done();
  });
  limitConnections(app, limits, logger);
  closeStalledConnectionsOnClose(app);
  await app.register(fp(httpApp, { name: 'http-app' }), appOptions);
  await app.ready();
  return app;
}

function limitConnections(app: FastifyInstance, limits: HttpLimits, logger: Logger): void {
  app.server.maxConnections = limits.maxConnections;
  app.server.on(
    'drop',
    throttledWarning(logger, { max_connections: limits.maxConnections }, 'connection limit reached: closing new connections (http_max_connections)'),
  );
  limitConnectionsPerClient(
    app.server,
    limits.maxConnectionsPerAddress,
    throttledWarning(
      logger,
      { max_connections_per_address: limits.maxConnectionsPerAddress },
      'a client address holds its limit of connections: closing its new ones (http_max_connections_per_address)',
    ),
  );
  closeConnectionsWithoutRequest(app.server, limits.firstRequestTimeoutMs);
}

/** A warning logged at most once a minute: a client refused in a loop must not flood the log. */
function throttledWarning(logger: Logger, fields: Record<string, unknown>, message: string): () => void {
  let lastWarning = 0;
  return () => {
    if (Date.now() - lastWarning < DROP_WARNING_EVERY_MS) return;
    lastWarning = Date.now();
    logger.warn(fields, message);
  };
}

/**
 * Closing stops Node's request-deadline checks, so a request whose client stalls would hold the close (and the
 * process's shutdown) forever. Idle connections close at once; the rest get a short grace to finish, then are cut.
 */
function closeStalledConnectionsOnClose(app: FastifyInstance): void {
  app.addHook('preClose', async () => {
    const cut = setTimeout(() => app.server.closeAllConnections(), SHUTDOWN_DRAIN_GRACE_MS);
    cut.unref();
    app.server.once('close', () => clearTimeout(cut));
  });
}

/** The control-plane server, optionally also serving the worker gate role on the same port. */
export function createServer(deps: AppDeps, logger: Logger, options: CreateServerOptions = {}): Promise<FastifyInstance> {
  return buildServer(
    {
      controlApiToken: deps.controlApiToken,
      controlPlane: deps,
      ...(options.workerGate ? { workerGate: options.workerGate } : {}),
      ...(options.allowedHosts ? { allowedHosts: options.allowedHosts } : {}),
      ...(options.operationalTrace ? { operationalTrace: options.operationalTrace } : {}),
      ...observabilityOptions(options),
      metrics: deps.metrics,
    },
    logger,
    options,
  );
}

const observabilityOptions = (options: CreateServerOptions) => ({
  ...(options.routeObservability ? { routeObservability: options.routeObservability } : {}),
  ...(options.memoryWarnRssMib !== undefined ? { memoryWarnRssMib: options.memoryWarnRssMib } : {}),
  ...(options.checkAnswers !== undefined ? { checkAnswers: options.checkAnswers } : {}),
});

/** A server for the worker gate role alone: no database, no Temporal. */
export function createWorkerGateServer(
  controlApiToken: string,
  workerGate: WorkerGateRole,
  logger: Logger,
  options: Pick<CreateServerOptions, 'onRoute' | 'allowedHosts' | 'limits' | 'operationalTrace' | 'routeObservability' | 'memoryWarnRssMib' | 'metrics' | 'checkAnswers'> = {},
): Promise<FastifyInstance> {
  return buildServer(
    {
      controlApiToken,
      workerGate,
      ...(options.allowedHosts ? { allowedHosts: options.allowedHosts } : {}),
      ...(options.operationalTrace ? { operationalTrace: options.operationalTrace } : {}),
      ...observabilityOptions(options),
      metrics: options.metrics ?? new ServiceMetrics(),
    },
    logger,
    options,
  );
}
