import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RegisteredRoute } from '../../api/create-server.ts';
import { startTestApp, TEST_GATE_TOKEN, TEST_TOKEN, type TestApp } from '../support/app.ts';

// Both roles on one server, so the walk covers the worker gate's routes too.
let t: TestApp;
let doc: { paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>> };
beforeAll(async () => {
  t = await startTestApp({}, { workerGate: true });
  doc = (await t.app.inject({ method: 'GET', url: '/control/api/openapi.json', headers: t.auth })).json();
});
afterAll(async () => t.close());

type Method = 'GET' | 'POST' | 'DELETE' | 'HEAD';
const concretePath = (url: string) => url.replace(/:[A-Za-z_]+/g, 'x');
const credentialsFor = (route: RegisteredRoute): Record<string, string> =>
  route.auth === 'gate' ? { authorization: `Bearer ${TEST_GATE_TOKEN}` } : route.auth === 'public' ? {} : t.auth;

const expectUnauthorized = (response: { statusCode: number; headers: Record<string, unknown>; body: string; json(): unknown }, what: string) => {
  expect(response.statusCode, what).toBe(401);
  expect(response.headers['www-authenticate'], what).toBe('Bearer');
  if (response.body !== '') expect(response.json(), what).toEqual({ detail: 'invalid bearer token' });
};

/** Spellings of a credential in a query string; each carries its own secret value so the logs can be searched for it. */
const SPELLINGS = [
  'token',
  'Token',
  'TOKEN',
  'tok%65n',
  'tok%2565n',
  'access_token',
  'Access-Token',
  'access%5Ftoken',
  'access+token',
  'id_token',
  'api_key',
  'API-KEY',
  'apikey',
  'x-api-key',
  'key',
  'Key',
  'auth',
  'AUTH',
  'bearer',
  'authorization',
  'password',
  'secret',
  'client_secret',
  'cp_session',
];
const secretFor = (index: number) => `url-secret-${index}-0123456789abcdef`;

describe('credential-like query parameters', () => {
  it('are refused with 401 in every spelling on a protected route, even next to a valid Authorization header', async () => {
    for (const [index, name] of SPELLINGS.entries()) {
      const url = `/control/health?${name}=${secretFor(index)}`;
      expectUnauthorized(await t.app.inject({ method: 'GET', url, headers: t.auth }), name);
      expectUnauthorized(await t.app.inject({ method: 'GET', url }), name);
    }
    // After another parameter, after `;`, and without a value.
    for (const query of [`page=1&Token=${TEST_TOKEN}`, `page=1;token=${TEST_TOKEN}`, 'token', 'page=1&access_token=']) {
      expectUnauthorized(await t.app.inject({ method: 'GET', url: `/control/api/events?${query}`, headers: t.auth }), query);
    }
  });

  it('are refused on every protected route of both roles, with the credentials that route takes', async () => {
    const protectedRoutes = t.routes.filter((route) => route.auth !== 'public');
    expect(protectedRoutes.map((route) => route.url)).toEqual(expect.arrayContaining(['/dispatch', '/control/api/worker-callback']));
    for (const route of protectedRoutes) {
      const url = `${concretePath(route.url)}?access_token=${TEST_TOKEN}`;
      const response = await t.app.inject({ method: route.method as Method, url, headers: credentialsFor(route), payload: route.method === 'POST' ? {} : undefined });
      expectUnauthorized(response, `${route.method} ${route.url}`);
    }
    // An unknown path takes credentials too.
    expectUnauthorized(await t.app.inject({ method: 'GET', url: `/no/such/path?api_key=${TEST_TOKEN}`, headers: t.auth }), 'unknown path');
  });

  it('never catch a query parameter that a route declares', async () => {
    let declared = 0;
    for (const route of t.routes.filter((route) => route.method !== 'HEAD')) {
      const operation = doc.paths[route.url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[route.method.toLowerCase()];
      for (const parameter of operation?.parameters ?? []) {
        if (parameter.in !== 'query') continue;
        declared += 1;
        const url = `${concretePath(route.url)}?${parameter.name}=`;
        const response = await t.app.inject({ method: route.method as Method, url, headers: credentialsFor(route) });
        expect(response.statusCode, `${route.method} ${url}`).not.toBe(401);
      }
    }
    expect(declared).toBeGreaterThan(10);
  });

  it('are not refused as credentials on public routes, where nothing is authenticated: only as unknown parameters', async () => {
    const health = await t.app.inject({ method: 'GET', url: `/healthz?access_token=${secretFor(1000)}` });
    expect(health.statusCode).toBe(422);
    expect(health.json().detail).toEqual([{ loc: ['query', 'access_token'], msg: 'unknown field', type: 'unrecognized_keys' }]);
  });
});

describe('the request log', () => {
  it('never holds the value of a credential-like query parameter: protected, public, refused and unknown routes', async () => {
    const urls = SPELLINGS.flatMap((name, index) => [
      { method: 'GET' as const, url: `/control/health?page=2&${name}=${secretFor(index)}`, headers: t.auth },
      { method: 'GET' as const, url: `/healthz?${name}=${secretFor(index)}&other=kept` },
      { method: 'GET' as const, url: `/no/such/path?${name}=${secretFor(index)}` },
      { method: 'POST' as const, url: `/control/api/session?${name}=${secretFor(index)}`, payload: { token: 'wrong' }, remoteAddress: '198.51.100.1' },
    ]);
    for (const [index, request] of urls.entries()) {
      await t.app.inject({ ...request, headers: { ...request.headers, 'x-request-id': `url-credentials-${index}` } });
    }
    const lines = t.logs.lines.filter((line) => line.includes('"request_id":"url-credentials-'));
    expect(lines).toHaveLength(urls.length);
    for (const [index] of SPELLINGS.entries()) expect(t.logs.text).not.toContain(secretFor(index));
    expect(t.logs.text).not.toContain(secretFor(1000));
    expect(t.logs.text).not.toContain(TEST_TOKEN);
    // The log still says what was asked for: names and other parameters stay.
    const logged = lines.map((line) => JSON.parse(line) as { req: { url: string } }).map((line) => line.req.url);
    expect(logged).toContain('/control/health?page=2&tok%65n=[Redacted]');
    expect(logged).toContain('/healthz?Access-Token=[Redacted]&other=kept');
  });
});
