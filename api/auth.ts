import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Store } from '../store/store.ts';
import { findLiveSession, touchSession } from '../store/sessions.ts';
import { HttpError, unauthorized } from '../http/errors.ts';
import { AGENT_EVENT_ROUTE, isGateTokenRoute } from '../worker-gate/routes.ts';
import { WORKER_CALLBACK_ROUTE } from './worker-callback.ts';
import { isPublicRoute } from './public-routes.ts';
import { csrfTokenFor, sha256Hex, tokensMatch } from '../http/tokens.ts';

export const SESSION_COOKIE = 'cp_session';
export const SESSION_IDLE_MS = 30 * 60 * 1000;
export const SESSION_ABSOLUTE_MS = 12 * 60 * 60 * 1000;
const TOUCH_EVERY_MS = 60 * 1000;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export type Principal = { kind: 'bearer' } | { kind: 'session'; sessionId: string; idHash: string };

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}

export interface AuthOptions {
  controlApiToken: string;
  /** Present when the control plane is served: dashboard sessions live there. */
  store?: Store;
  /** Present when the worker gate role is served. */
  workerGateToken?: string;
  /** completion_callback_token: the worker gates' callbacks carry it (the control API token also works there). */
  callbackToken?: string;
}

const pathOf = (url: string) => {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
};

const hasQueryToken = (url: string) => /[?&]token(=|&|$)/.test(url);

export function bearerFrom(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (!header) return undefined;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  return match?.[1];
}

/**
 * The single authentication hook. It runs before routing, so an unknown path without credentials is 401, not 404.
 * The worker gate's own routes take its token; the agents' event hook takes the control API token; the worker callback
 * also takes the completion callback token; everything else takes the control API token or the dashboard session
 * cookie (with X-CSRF-Token for anything but reads).
 */
async function authPlugin(app: FastifyInstance, options: AuthOptions): Promise<void> {
  const requireBearer = (request: FastifyRequest, expected: string) => {
    const bearer = bearerFrom(request);
    if (bearer === undefined || !tokensMatch(bearer, expected)) throw unauthorized();
    request.principal = { kind: 'bearer' };
  };

  app.addHook('onRequest', async (request) => {
    const path = pathOf(request.url);
    if (isPublicRoute(request.method, path)) return;
    // A token in a URL ends up in logs and browser history: refused even next to a valid header.
    if (hasQueryToken(request.url)) throw unauthorized();

    // HEAD is answered by the GET route, so it takes the same credentials.
    const route = `${request.method === 'HEAD' ? 'GET' : request.method} ${path}`;
    if (options.workerGateToken !== undefined) {
      if (isGateTokenRoute(route)) return requireBearer(request, options.workerGateToken);
      if (route === AGENT_EVENT_ROUTE) return requireBearer(request, options.controlApiToken);
    }
    if (route === WORKER_CALLBACK_ROUTE && options.callbackToken !== undefined) {
      const bearer = bearerFrom(request);
      if (bearer !== undefined && tokensMatch(bearer, options.callbackToken)) {
        request.principal = { kind: 'bearer' };
        return;
      }
    }
    if (!options.store) {
      // The gate alone: any of its two tokens authenticates, so an unknown path then answers 404.
      const bearer = bearerFrom(request);
      const known = [options.controlApiToken, options.workerGateToken].filter((token) => token !== undefined);
      if (bearer === undefined || !known.some((token) => tokensMatch(bearer, token))) throw unauthorized();
      request.principal = { kind: 'bearer' };
      return;
    }

    const bearer = bearerFrom(request);
    if (bearer !== undefined) return requireBearer(request, options.controlApiToken);
    await authenticateSession(request, options.store, options.controlApiToken);
  });
}

async function authenticateSession(request: FastifyRequest, store: Store, controlApiToken: string): Promise<void> {
  const sessionId = request.cookies?.[SESSION_COOKIE];
  if (!sessionId) throw unauthorized();
  const idHash = sha256Hex(sessionId);
  const session = await findLiveSession(store, idHash, SESSION_IDLE_MS);
  if (!session) throw unauthorized();
  if (!SAFE_METHODS.has(request.method)) {
    const presented = request.headers['x-csrf-token'];
    const expected = csrfTokenFor(sessionId, controlApiToken);
    if (typeof presented !== 'string' || !tokensMatch(presented, expected)) {
      throw new HttpError(403, 'missing or invalid CSRF token');
    }
  }
  if (!store.readOnly && Date.now() - Date.parse(session.last_seen_at) > TOUCH_EVERY_MS) {
    await touchSession(store, idHash);
  }
  request.principal = { kind: 'session', sessionId, idHash };
}

export const auth = fp(authPlugin, { name: 'control-plane-auth' });
