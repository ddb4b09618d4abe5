import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth } from '../../api/auth.ts';
import { startTestApp, TEST_GATE_TOKEN, TEST_TOKEN, type TestApp } from '../support/app.ts';

// Both roles on one server, as a single-machine install runs them, so the walk covers the gate's routes too.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({}, { workerGate: true });
});
afterAll(async () => t.close());

const concretePath = (url: string) => url.replace(/:[A-Za-z_]+/g, 'x').replace(/\*/g, 'x');

const expectUnauthorized = (response: { statusCode: number; headers: Record<string, unknown>; body: string; json(): unknown }) => {
  expect(response.statusCode).toBe(401);
  expect(response.headers['www-authenticate']).toBe('Bearer');
  // HEAD responses carry the status and headers only.
  if (response.body !== '') expect(response.json()).toEqual({ detail: 'invalid bearer token' });
};

describe('authentication over the whole route table', () => {
  const protectedRoutes = () => t.routes.filter((route) => route.auth !== 'public');
  const publicRoutes = () => t.routes.filter((route) => route.auth === 'public');

  it('has protected routes to check (the table was collected), the worker gate\'s among them', () => {
    expect(protectedRoutes().length).toBeGreaterThanOrEqual(9);
    expect(protectedRoutes().map((route) => `${route.method} ${route.url}`)).toEqual(
      expect.arrayContaining(['POST /prepare-project', 'POST /dispatch', 'GET /dashboard/api', 'POST /legacy-agent/event']),
    );
  });

  it('takes the worker gate token on the gate routes, the control API token on the event hook, and neither elsewhere', async () => {
    const gateAuth = { authorization: `Bearer ${TEST_GATE_TOKEN}` };
    expect((await t.app.inject({ method: 'GET', url: '/dashboard/api', headers: gateAuth })).statusCode).toBe(200);
    expectUnauthorized(await t.app.inject({ method: 'GET', url: '/dashboard/api', headers: t.auth }));
    expectUnauthorized(await t.app.inject({ method: 'POST', url: '/dispatch', headers: t.auth, payload: {} }));
    expectUnauthorized(await t.app.inject({ method: 'POST', url: '/legacy-agent/event', headers: gateAuth, payload: {} }));
    const event = await t.app.inject({ method: 'POST', url: '/legacy-agent/event', headers: t.auth, payload: { event: 'session-idle', run_id: 'nobody' } });
    expect(event.json()).toMatchObject({ ignored: true, ignore_reason: 'unknown run' });
    expectUnauthorized(await t.app.inject({ method: 'GET', url: '/control/health', headers: gateAuth }));
    const health = await t.app.inject({ method: 'GET', url: '/healthz' });
    expect(health.json()).toMatchObject({ ok: true, worker_gate: { ready: true } });
  });

  it('answers 401 to every protected route without a token, with a wrong token, and with ?token=', async () => {
    for (const route of protectedRoutes()) {
      const url = concretePath(route.url);
      const method = route.method as 'GET';
      expectUnauthorized(await t.app.inject({ method, url }));
      expectUnauthorized(await t.app.inject({ method, url, headers: { authorization: 'Bearer wrong-token' } }));
      expectUnauthorized(await t.app.inject({ method, url: `${url}?token=${TEST_TOKEN}` }));
      expectUnauthorized(await t.app.inject({ method, url: `${url}?token=${TEST_TOKEN}`, headers: t.auth }));
    }
  });

  it('serves every public route without a token, and only the expected ones are public', async () => {
    expect(publicRoutes().map((route) => `${route.method} ${route.url}`).sort()).toEqual(
      [
        'GET /control/dashboard',
        'GET /control/dashboard-v2',
        'GET /control/dashboard-v2/assets/:file',
        'GET /dashboard',
        'GET /favicon.ico',
        'GET /gate-identity',
        'GET /healthz',
        'HEAD /control/dashboard',
        'HEAD /control/dashboard-v2',
        'HEAD /control/dashboard-v2/assets/:file',
        'HEAD /dashboard',
        'HEAD /favicon.ico',
        'HEAD /gate-identity',
        'HEAD /healthz',
        'POST /control/api/session',
      ].sort(),
    );
    for (const { method, url: route } of publicRoutes()) {
      // The gate's identity proof answers a challenge, which it requires.
      const url = route === '/gate-identity' ? `${route}?challenge=${'c'.repeat(43)}` : route.replace(':file', 'app.js');
      const response = await t.app.inject({ method, url, payload: method === 'POST' ? { token: 'nope' } : undefined });
      // The login route is public but still checks the token it is given.
      if (url === '/control/api/session') expect(response.statusCode).toBe(401);
      else expect(response.statusCode).toBeLessThan(400);
    }
  });

  it('answers 401 before routing: an unknown path is 401 without credentials and 404 with them', async () => {
    expectUnauthorized(await t.app.inject({ method: 'GET', url: '/no/such/path' }));
    expectUnauthorized(await t.app.inject({ method: 'DELETE', url: '/healthz' }));
    const known = await t.app.inject({ method: 'GET', url: '/no/such/path', headers: t.auth });
    expect(known.statusCode).toBe(404);
    expect(known.json()).toEqual({ detail: 'Not Found' });
  });

  it('accepts the bearer scheme case-insensitively and nothing else', async () => {
    const lower = await t.app.inject({ method: 'GET', url: '/control/health', headers: { authorization: `bearer ${TEST_TOKEN}` } });
    expect(lower.statusCode).toBe(200);
    expectUnauthorized(await t.app.inject({ method: 'GET', url: '/control/health', headers: { authorization: `Basic ${TEST_TOKEN}` } }));
    expectUnauthorized(await t.app.inject({ method: 'GET', url: '/control/health', headers: { authorization: `Bearer ${TEST_TOKEN}x` } }));
  });
});

describe('authentication decided by the route that matched', () => {
  const gateAuth = { authorization: `Bearer ${TEST_GATE_TOKEN}` };
  const encodedGatePaths = [
    { method: 'POST', url: '/prepare-%70roject' },
    { method: 'POST', url: '/dispatc%68' },
    { method: 'POST', url: '/runs/x/cance%6c' },
    { method: 'GET', url: '/dashboard/ap%69' },
  ] as const;

  it('does not let a percent-encoded spelling of a gate path past the gate token', async () => {
    for (const { method, url } of encodedGatePaths) {
      const response = await t.app.inject({ method, url, headers: t.auth, payload: method === 'POST' ? {} : undefined });
      expectUnauthorized(response);
    }
  });

  it('routes the encoded spellings to the gate routes, which take the gate token', async () => {
    const dashboard = await t.app.inject({ method: 'GET', url: '/dashboard/ap%69', headers: gateAuth });
    expect(dashboard.statusCode).toBe(200);
    expect(dashboard.json()).toMatchObject({ service: { role: 'worker_gate' } });
    // Past authentication, an empty body fails the dispatch schema.
    expect((await t.app.inject({ method: 'POST', url: '/dispatc%68', headers: gateAuth, payload: {} })).statusCode).toBe(422);
  });

  it('gives HEAD the credentials of the GET route', async () => {
    expect((await t.app.inject({ method: 'HEAD', url: '/dashboard/api', headers: gateAuth })).statusCode).toBe(200);
    expectUnauthorized(await t.app.inject({ method: 'HEAD', url: '/dashboard/api', headers: t.auth }));
    expectUnauthorized(await t.app.inject({ method: 'HEAD', url: '/control/health', headers: gateAuth }));
    expect((await t.app.inject({ method: 'HEAD', url: '/control/health', headers: t.auth })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'HEAD', url: '/healthz' })).statusCode).toBe(200);
  });

  it('refuses to register a route that declares no auth kind', async () => {
    const app = Fastify();
    await app.register(auth, { controlApiToken: TEST_TOKEN });
    expect(() => app.get('/forgotten', async () => ({}))).toThrow(/declares no auth kind/);
    expect(() => app.get('/typo', { config: { auth: 'pubic' as 'public' } }, async () => ({}))).toThrow(/declares no auth kind/);
    await app.close();
  });
});

describe('request logging', () => {
  it('writes one line per request, with its id and status, and never the token', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/control/health', headers: { ...t.auth, 'x-request-id': 'log-line-check-1' } });
    expect(response.headers['x-request-id']).toBe('log-line-check-1');
    const lines = t.logs.lines.filter((line) => line.includes('log-line-check-1'));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: 'request completed', status: 200 });
    expect(t.logs.text).not.toContain('incoming request');
    expect(t.logs.text).not.toContain(TEST_TOKEN);
  });

  it('logs a read that succeeded at debug, and a write, a refusal or a failure at info', async () => {
    const levelOf = async (request: { method: 'GET' | 'POST'; url: string; headers?: Record<string, string>; payload?: Record<string, unknown> }) => {
      const id = `log-level-${Math.random().toString(36).slice(2)}`;
      await t.app.inject({ ...request, headers: { ...request.headers, 'x-request-id': id } });
      const line = t.logs.lines.find((text) => text.includes(id) && text.includes('request completed'));
      return line === undefined ? undefined : (JSON.parse(line) as { level: number }).level;
    };
    const [DEBUG, INFO] = [20, 30];
    expect(await levelOf({ method: 'GET', url: '/control/health', headers: t.auth })).toBe(DEBUG);
    expect(await levelOf({ method: 'GET', url: '/control/health' })).toBe(INFO);
    expect(await levelOf({ method: 'GET', url: '/control/api/no-such-route', headers: t.auth })).toBe(INFO);
    expect(await levelOf({ method: 'POST', url: '/control/api/queue/enqueue', headers: t.auth, payload: {} })).toBe(INFO);
  });
});
