import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { endDashboardSession, startDashboardSession } from '../platform/auth/dashboard-sessions.ts';
import { SESSION_ABSOLUTE_MS, SESSION_COOKIE, SESSION_IDLE_MS } from './auth.ts';
import type { AppDeps } from './deps.ts';
import { HttpError, unauthorized } from '../platform/http/errors.ts';
import { clientKey, FailureLimit, tooManyRequests } from '../platform/http/failure-limit.ts';
import { spendSignInFailure } from '../platform/auth/sign-in-failures.ts';
import { errorResponses } from '../platform/http/responses.ts';
import { csrfTokenFor, tokensMatch } from '../platform/http/tokens.ts';

/**
 * Wrong sign-ins one client address may make per window, so the control token cannot be guessed at speed. Only
 * failures count, and a correct token is never refused: any local process shares the operator's address, and must
 * not be able to lock the operator out. The count lives in the database, so it holds for every replica together.
 */
export const SIGN_IN_ATTEMPTS_PER_WINDOW = 10;
export const SIGN_IN_WINDOW_MS = 60_000;

const loginBody = z.object({ token: z.string().min(1).max(4096) }).strict();

const LoginAnswer = z.object({
  csrf_token: z.string().describe('Send as X-CSRF-Token on anything but reads'),
  expires_at: z.string(),
  idle_timeout_sec: z.number().int(),
});

const tags = ['session'];

const SETS_SESSION_COOKIE = { 'Set-Cookie': { type: 'string', description: 'cp_session: HttpOnly, SameSite=Strict, Path=/control' } } as const;
const CLEARS_SESSION_COOKIE = { 'Set-Cookie': { type: 'string', description: 'cp_session, expired' } } as const;

export async function sessionRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'controlApiToken' | 'sessionCookieSecure'>): Promise<void> {
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
    response: { 200: LoginAnswer, ...errorResponses(401, 422, 429) },
  };
  const limits = { maxFailures: SIGN_IN_ATTEMPTS_PER_WINDOW, windowMs: SIGN_IN_WINDOW_MS };
  // A read-only store cannot record failures: such a replica counts its own in memory.
  const inMemory = deps.store.readOnly ? new FailureLimit(limits) : null;
  const spendFailure = async (client: string) => {
    if (inMemory) return inMemory.fail(client);
    const spent = await spendSignInFailure(deps.store, client, limits);
    if (spent.refused) throw tooManyRequests(spent.retryAfterSec);
  };
  app.post('/control/api/session', { config: { auth: 'public', answerHeaders: { 200: SETS_SESSION_COOKIE } }, schema: login }, async (request, reply) => {
    const { token } = request.body;
    if (!tokensMatch(token, deps.controlApiToken)) {
      await spendFailure(clientKey(request.ip));
      throw unauthorized();
    }
    const { sessionId, expiresAt } = await startDashboardSession(deps.store, {
      absoluteMs: SESSION_ABSOLUTE_MS,
      idleMs: SESSION_IDLE_MS,
      requestId: request.id,
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
    response: { 200: z.object({ csrf_token: z.string() }), ...errorResponses(401, 404) },
  };
  app.get('/control/api/session', { config: { auth: 'control' }, schema: current }, async (request) => {
    const principal = request.principal;
    if (principal?.kind !== 'session') throw new HttpError(404, 'no dashboard session');
    return { csrf_token: csrfTokenFor(principal.sessionId, deps.controlApiToken) };
  });

  const signOut = { tags, summary: 'Sign out: ends the session and clears its cookie', response: { 200: z.object({ ok: z.boolean() }), ...errorResponses(401, 403) } };
  app.delete('/control/api/session', { config: { auth: 'control', answerHeaders: { 200: CLEARS_SESSION_COOKIE } }, schema: signOut }, async (request, reply) => {
    const principal = request.principal;
    if (principal?.kind === 'session') await endDashboardSession(deps.store, principal.idHash, request.id);
    clearCookie(reply);
    return { ok: true };
  });
}
