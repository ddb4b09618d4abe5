import { request as httpRequest } from 'node:http';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RegisteredRoute } from '../../api/create-server.ts';
import { startTestApp, TEST_GATE_TOKEN, type TestApp } from '../support/app.ts';
import { CallbackReceiver, GATE_TOKEN, startGateProcess, writeGateConfig } from '../support/gate.ts';

// Both roles on one server, so every route of both is checked.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({}, { workerGate: true, allowedHosts: ['dashboard.lab', 'localhost:8787'] });
});
afterAll(async () => t.close());

type Method = 'GET' | 'POST' | 'DELETE' | 'HEAD';
const concretePath = (url: string) => url.replace(/:[A-Za-z_]+/g, 'x');
const credentialsFor = (route: RegisteredRoute): Record<string, string> =>
  route.auth === 'gate' ? { authorization: `Bearer ${TEST_GATE_TOKEN}` } : route.auth === 'public' ? {} : t.auth;

const expectHostRefused = (response: { statusCode: number; body: string; json(): unknown }, what: string) => {
  expect(response.statusCode, what).toBe(421);
  if (response.body !== '') expect(response.json(), what).toEqual({ detail: 'host not allowed' });
};

describe('allowed_hosts', () => {
  it('refuses every route of both roles for a host name not in the list, with or without credentials, before authentication', async () => {
    expect(t.routes.length).toBeGreaterThan(20);
    for (const route of t.routes) {
      const url = concretePath(route.url);
      const method = route.method as Method;
      const what = `${method} ${route.url}`;
      expectHostRefused(await t.app.inject({ method, url, headers: { host: 'attacker.example:8787', ...credentialsFor(route) } }), what);
      expectHostRefused(await t.app.inject({ method, url, headers: { host: 'attacker.example:8787' } }), what);
    }
    expectHostRefused(await t.app.inject({ method: 'GET', url: '/no/such/path', headers: { host: 'attacker.example' } }), 'unknown path');
  });

  it('serves the names in the list: a bare name on any port, name:port on that port alone, case-insensitively', async () => {
    const health = (host: string) => t.app.inject({ method: 'GET', url: '/healthz', headers: { host } });
    for (const host of ['dashboard.lab', 'dashboard.lab:8787', 'DASHBOARD.lab:9000', 'localhost:8787']) {
      expect((await health(host)).statusCode, host).toBe(200);
    }
    for (const host of ['localhost', 'localhost:8788', 'dashboard.lab.attacker.example', 'sub.dashboard.lab', '']) {
      expectHostRefused(await health(host), host);
    }
    // Past the host check, authentication still applies.
    const control = await t.app.inject({ method: 'GET', url: '/control/health', headers: { host: 'dashboard.lab:8787' } });
    expect(control.statusCode).toBe(401);
    const authorized = await t.app.inject({ method: 'GET', url: '/control/health', headers: { host: 'dashboard.lab:8787', ...t.auth } });
    expect(authorized.statusCode).toBe(200);
  });

  it('always serves an IP address: DNS rebinding needs a host name, and agents reach the gate by address', async () => {
    for (const host of ['127.0.0.1:8787', '127.0.0.1', '10.0.0.5:1234', '[::1]:8787', '[::1]']) {
      expect((await t.app.inject({ method: 'GET', url: '/healthz', headers: { host } })).statusCode, host).toBe(200);
    }
  });

  it('checks nothing when the list is empty', async () => {
    const open = await startTestApp();
    try {
      const response = await open.app.inject({ method: 'GET', url: '/healthz', headers: { host: 'attacker.example' } });
      expect(response.statusCode).toBe(200);
    } finally {
      await open.close();
    }
  });
});

/** A request with a Host header of our choosing (fetch does not let one set it). */
function get(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method: 'GET', headers }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

describe('the real worker gate process', () => {
  it('applies allowed_hosts from its config and never logs a credential from a query string', async () => {
    const receiver = await CallbackReceiver.start();
    const fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { allowed_hosts: ['gate.lab'] } });
    // At debug the log has a line for every request, a successful read's too.
    const gate = await startGateProcess(fixture, { LOG_LEVEL: 'debug' });
    try {
      const gateAuth = { authorization: `Bearer ${GATE_TOKEN}` };
      const refused = await get(`${fixture.url}/dashboard/api`, { host: `attacker.example:${fixture.port}`, ...gateAuth });
      expect(refused.status).toBe(421);
      expect(JSON.parse(refused.body)).toEqual({ detail: 'host not allowed' });
      expect((await get(`${fixture.url}/dashboard/api`, { host: `gate.lab:${fixture.port}`, ...gateAuth })).status).toBe(200);

      const secret = 'query-secret-in-a-real-log-0123456789';
      const inQuery = await get(`${fixture.url}/dashboard/api?limit=1&Access_Token=${secret}`, { host: 'gate.lab', ...gateAuth });
      expect(inQuery.status).toBe(401);
      // A public route authenticates nothing: the parameter is refused only as one the route does not take.
      expect((await get(`${fixture.url}/healthz?api-key=${secret}`, { host: 'gate.lab' })).status).toBe(422);
      await gate.kill('SIGTERM');
      expect(gate.output()).toContain('Access_Token=[Redacted]');
      expect(gate.output()).toContain('api-key=[Redacted]');
      expect(gate.output()).not.toContain(secret);
    } finally {
      await gate.kill('SIGKILL');
      await receiver.down();
      await rm(fixture.dir, { recursive: true, force: true });
    }
  }, 90_000);
});
