import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Store } from '../platform/store/store.ts';
import { findLiveSession, touchSession } from '../platform/auth/session-ledger.ts';
import { HttpError, unauthorized } from '../platform/http/errors.ts';
import { csrfTokenFor, sha256Hex, tokenMatcher, tokensMatch } from '../platform/http/tokens.ts';
import { requestHook } from '../platform/http/hooks.ts';
import { hasCredentialQuery } from '../platform/http/url-credentials.ts';

export const SESSION_COOKIE = 'cp_session';
export const SESSION_IDLE_MS = 30 * 60 * 1000;
export const SESSION_ABSOLUTE_MS = 12 * 60 * 60 * 1000;
const TOUCH_EVERY_MS = 60 * 1000;
/** Reads: a dashboard session needs no CSRF token for them. */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

export type Principal =
  | { kind: 'bearer' }
  | { kind: 'session'; sessionId: string; idHash: string }
  /** An agent's own token: good only for requests that name its run. */
  | { kind: 'agent_run'; runId: string };

/**
 * Who may call a route (docs/security.md#security-model): `public` anyone; `control` the control API token or a dashboard
 * session; `gate` the worker gate's token; `agent_event` a run's own agent token for that run, or the control API
 * token; `callback` the completion callback token only.
 */
export const AUTH_KINDS = ['public', 'control', 'gate', 'agent_event', 'callback'] as const;
export type AuthKind = (typeof AUTH_KINDS)[number];

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyContextConfig {
    /** Every route declares who may call it; registering one without is an error. */
    auth?: AuthKind;
  }
}

export interface AuthOptions {
  controlApiToken: string;
  /** Present when the control plane is served: dashboard sessions live there. */
  store?: Store;
  /** Present when the worker gate role is served. */
  workerGateToken?: string;
  /** completion_callback_token: the worker gates' callbacks carry it, and nothing else is taken there. */
  callbackToken?: string;
  /** The run an agent token belongs to while that run takes events (the gate's GATE_EVENT_TOKEN); present with the gate. */
  agentRunFor?: (token: string) => string | undefined;
}

export function bearerFrom(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (!header) return undefined;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  return match?.[1];
}

const BEARER_PRINCIPAL: Principal = Object.freeze({ kind: 'bearer' });

const isAuthKind = (value: unknown): value is AuthKind => AUTH_KINDS.includes(value as AuthKind);

/**
 * The single authentication hook. It decides from the route that matched (never from the raw URL, which may spell a
 * path differently), before the handler and before validation, so an unknown path without credentials is 401, not
 * 404. A HEAD route is Fastify's copy of the GET route, options included, so it takes the same credentials.
 */
async function authPlugin(app: FastifyInstance, options: AuthOptions): Promise<void> {
  // Declared up front, so setting it on a request keeps the shape every request object shares (Fastify's advice).
  app.decorateRequest('principal', undefined);
  app.addHook('onRoute', (route) => {
    if (!isAuthKind(route.config?.auth)) {
      throw new Error(`route ${[route.method].flat().join(',')} ${route.url} declares no auth kind (config.auth: ${AUTH_KINDS.join(' | ')})`);
    }
  });

  type Matcher = (presented: string) => boolean;
  const matcherOf = (token: string | undefined): Matcher | undefined => (token === undefined ? undefined : tokenMatcher(token));
  const controlToken = matcherOf(options.controlApiToken);
  const gateToken = matcherOf(options.workerGateToken);
  const callbackToken = matcherOf(options.callbackToken);

  /** Any one of `accepted` (a token this server does not hold is left out) authenticates. */
  const requireBearer = (request: FastifyRequest, ...accepted: (Matcher | undefined)[]) => acceptBearer(request, bearerFrom(request), accepted);
  const acceptBearer = (request: FastifyRequest, bearer: string | undefined, accepted: (Matcher | undefined)[]) => {
    if (bearer === undefined || !accepted.some((matches) => matches !== undefined && matches(bearer))) throw unauthorized();
    request.principal = BEARER_PRINCIPAL;
  };

  /** A bearer token is checked at once; only a dashboard session waits for the store. */
  const authenticateControl = (request: FastifyRequest): void | Promise<void> => {
    const bearer = bearerFrom(request);
    if (!options.store || bearer !== undefined) return acceptBearer(request, bearer, [controlToken]);
    return authenticateSession(request, options.store, options.controlApiToken);
  };

  /** No route matched: the answer is 404 for a caller who could have called something here, else 401. */
  const authenticateUnrouted = (request: FastifyRequest): void | Promise<void> => {
    if (options.store) return authenticateControl(request);
    // The gate alone: either of its two tokens authenticates.
    return requireBearer(request, controlToken, gateToken);
  };

  const authenticate = (request: FastifyRequest): void | Promise<void> => {
    const kind = request.routeOptions.config.auth;
    if (kind === 'public') return;
    // A credential in a URL ends up in logs and browser history: refused even next to a valid header.
    if (hasCredentialQuery(request.url)) throw unauthorized();

    switch (kind) {
      case 'gate':
        return requireBearer(request, gateToken);
      case 'agent_event': {
        const bearer = bearerFrom(request);
        const runId = bearer === undefined ? undefined : options.agentRunFor?.(bearer);
        if (runId === undefined) return requireBearer(request, controlToken);
        // Not yet a principal: the token is good only once the body names its run (requireOwnRun).
        runAwaitingBody.set(request, runId);
        return;
      }
      case 'callback':
        return requireBearer(request, callbackToken);
      case 'control':
        return authenticateControl(request);
      case undefined:
        return authenticateUnrouted(request);
    }
  };
  app.addHook('onRequest', requestHook(authenticate));
  app.addHook('preValidation', requestHook(requireOwnRun));
}

/** Requests that presented an agent's token, by its run, until their body has shown that run. */
const runAwaitingBody = new WeakMap<FastifyRequest, string>();

/**
 * An agent's token covers only requests for its own run: the body must name that run as `run_id`. Checked once the
 * body is parsed and before anything else looks at it (the first preValidation hook), so another run's token gets 401
 * whatever else the body holds.
 */
function requireOwnRun(request: FastifyRequest): void {
  const runId = runAwaitingBody.get(request);
  if (runId === undefined) return;
  const body = request.body as { run_id?: unknown } | null | undefined;
  if (typeof body !== 'object' || body === null || body.run_id !== runId) throw unauthorized();
  runAwaitingBody.delete(request);
  request.principal = { kind: 'agent_run', runId };
}

/**
 * True while a request's credential is an agent's token whose run its body has not yet shown: a body that fails to
 * parse (bad JSON, too large, another media type) never shows it, so any failure then is answered 401, not the
 * body's own fault.
 */
export const awaitingOwnRun = (request: FastifyRequest): boolean => runAwaitingBody.has(request);

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
