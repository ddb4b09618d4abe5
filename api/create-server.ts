import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { httpApp, type HttpAppOptions, type WorkerGateRole } from './app.ts';
import type { AuthKind } from './auth.ts';
import type { AppDeps } from './deps.ts';
import { BODY_LIMIT_BYTES } from '../http/errors.ts';

const INCOMING_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

export interface RegisteredRoute {
  method: string;
  url: string;
  /** Who may call it (README "HTTP conventions"). */
  auth: AuthKind | undefined;
}

export interface CreateServerOptions {
  /** Called for every route as it is registered (the auth tests walk the whole table). */
  onRoute?: (route: RegisteredRoute) => void;
  /** Also serve the worker gate role on this server. */
  workerGate?: WorkerGateRole;
  /** config allowed_hosts: host names this server answers to (README "HTTP conventions"); empty or absent answers any. */
  allowedHosts?: readonly string[];
}

async function buildServer(appOptions: HttpAppOptions, logger: Logger, options: CreateServerOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: false,
    genReqId: (request) => {
      const incoming = request.headers['x-request-id'];
      return typeof incoming === 'string' && INCOMING_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    forceCloseConnections: 'idle',
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
  app.addHook('onResponse', async (request, reply) => {
    request.log.info({ req: request, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 }, 'request completed');
  });
  await app.register(fp(httpApp, { name: 'http-app' }), appOptions);
  await app.ready();
  return app;
}

/** The control-plane server, optionally also serving the worker gate role on the same port. */
export function createServer(deps: AppDeps, logger: Logger, options: CreateServerOptions = {}): Promise<FastifyInstance> {
  return buildServer(
    {
      controlApiToken: deps.controlApiToken,
      controlPlane: deps,
      ...(options.workerGate ? { workerGate: options.workerGate } : {}),
      ...(options.allowedHosts ? { allowedHosts: options.allowedHosts } : {}),
    },
    logger,
    options,
  );
}

/** A server for the worker gate role alone: no database, no Temporal. */
export function createWorkerGateServer(
  controlApiToken: string,
  workerGate: WorkerGateRole,
  logger: Logger,
  options: Pick<CreateServerOptions, 'onRoute' | 'allowedHosts'> = {},
): Promise<FastifyInstance> {
  return buildServer({ controlApiToken, workerGate, ...(options.allowedHosts ? { allowedHosts: options.allowedHosts } : {}) }, logger, options);
}
