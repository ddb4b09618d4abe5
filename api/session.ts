import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { appendAuditEvent } from '../store/audit-events.ts';
import { deleteExpiredSessions, deleteSession, insertSession } from '../store/sessions.ts';
import { SESSION_ABSOLUTE_MS, SESSION_COOKIE, SESSION_IDLE_MS } from './auth.ts';
import type { AppDeps } from './deps.ts';
import { HttpError, unauthorized } from '../http/errors.ts';
import { csrfTokenFor, randomToken, sha256Hex, tokensMatch } from '../http/tokens.ts';

const loginBody = z.object({ token: z.string().min(1).max(4096) }).strict();

/** Audit entity ids name a session by a prefix of its hash, never by the cookie value. */
const sessionEntityId = (idHash: string) => idHash.slice(0, 16);

export async function sessionRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const cookieOptions = {
    httpOnly: true,
    sameSite: 'strict' as const,
    path: '/control',
    secure: deps.sessionCookieSecure,
  };

  const clearCookie = (reply: FastifyReply) => reply.clearCookie(SESSION_COOKIE, cookieOptions);

  app.post('/control/api/session', { schema: { body: loginBody } }, async (request, reply) => {
    const { token } = request.body as z.output<typeof loginBody>;
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
  app.get('/control/api/session', async (request) => {
    const principal = request.principal;
    if (principal?.kind !== 'session') throw new HttpError(404, 'no dashboard session');
    return { csrf_token: csrfTokenFor(principal.sessionId, deps.controlApiToken) };
  });

  app.delete('/control/api/session', async (request, reply) => {
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
