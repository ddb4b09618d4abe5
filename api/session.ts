import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { appendAuditEvent } from '../store/audit-events.ts';
import { deleteExpiredSessions, deleteSession, insertSession } from '../store/sessions.ts';
import { SESSION_ABSOLUTE_MS, SESSION_COOKIE, SESSION_IDLE_MS } from './auth.ts';
import type { AppDeps } from './deps.ts';
import { HttpError, unauthorized } from '../http/errors.ts';
import { errorResponses, openObject } from '../http/responses.ts';
import { csrfTokenFor, randomToken, sha256Hex, tokensMatch } from '../http/tokens.ts';

const loginBody = z.object({ token: z.string().min(1).max(4096) }).strict();

/** Audit entity ids name a session by a prefix of its hash, never by the cookie value. */
const sessionEntityId = (idHash: string) => idHash.slice(0, 16);

const LoginAnswer = openObject({
  csrf_token: z.string().describe('Send as X-CSRF-Token on anything but reads'),
  expires_at: z.string(),
  idle_timeout_sec: z.number().int(),
});

const tags = ['session'];

export async function sessionRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const cookieOptions = {
    httpOnly: true,
    sameSite: 'strict' as const,
    path: '/control',
    secure: deps.sessionCookieSecure,
  };

  const clearCookie = (reply: FastifyReply) => reply.clearCookie(SESSION_COOKIE, cookieOptions);

  const login = {
    tags,
    summary: 'Sign in with the control API token: sets the HttpOnly cp_session cookie',
    body: loginBody,
    response: { 200: LoginAnswer, ...errorResponses(401, 422) },
  };
  app.post('/control/api/session', { config: { auth: 'public' }, schema: login }, async (request, reply) => {
    const { token } = request.body;
    if (!tokensMatch(token, deps.controlApiToken)) throw unauthorized();
    const sessionId = randomToken();
    const idHash = sha256Hex(sessionId);
    const expiresAt = new Date(Date.now() + SESSION_ABSOLUTE_MS);
    await deps.store.transaction(async (tx) => {
      // Logins are rare, so they are a good moment to forget sessions that can no longer be used.
      await deleteExpiredSessions(tx, SESSION_IDLE_MS);
      await insertSession(tx, { idHash, expiresAt });
      await appendAuditEvent(tx, {
        entity_type: 'dashboard_session',
        entity_id: sessionEntityId(idHash),
        event_type: 'dashboard_session.created',
        payload: { expires_at: expiresAt.toISOString() },
        request_id: request.id,
      });
    });
    reply.setCookie(SESSION_COOKIE, sessionId, { ...cookieOptions, maxAge: SESSION_ABSOLUTE_MS / 1000 });
    return {
      csrf_token: csrfTokenFor(sessionId, deps.controlApiToken),
      expires_at: expiresAt.toISOString(),
      idle_timeout_sec: SESSION_IDLE_MS / 1000,
    };
  });

  // Lets a reloaded dashboard recover its CSRF token from the cookie it still holds.
  const current = {
    tags,
    summary: 'The CSRF token of the current dashboard session',
    response: { 200: openObject({ csrf_token: z.string() }), ...errorResponses(401, 404) },
  };
  app.get('/control/api/session', { config: { auth: 'control' }, schema: current }, async (request) => {
    const principal = request.principal;
    if (principal?.kind !== 'session') throw new HttpError(404, 'no dashboard session');
    return { csrf_token: csrfTokenFor(principal.sessionId, deps.controlApiToken) };
  });

  const signOut = { tags, summary: 'Sign out: ends the session and clears its cookie', response: { 200: openObject({ ok: z.boolean() }), ...errorResponses(401, 403) } };
  app.delete('/control/api/session', { config: { auth: 'control' }, schema: signOut }, async (request, reply) => {
    const principal = request.principal;
    if (principal?.kind === 'session') {
      await deps.store.transaction(async (tx) => {
        if (await deleteSession(tx, principal.idHash)) {
          await appendAuditEvent(tx, {
            entity_type: 'dashboard_session',
            entity_id: sessionEntityId(principal.idHash),
            event_type: 'dashboard_session.deleted',
            request_id: request.id,
          });
        }
      });
    }
    clearCookie(reply);
    return { ok: true };
  });
}
