import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigFileSchema } from '../../platform/config/schema.ts';
import { dispatchSettingsFrom } from '../../capabilities/runs/dispatch-settings.ts';
import { startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { GATE_TOKEN } from '../support/gate.ts';
import { testPort } from '../support/ports.ts';

// expected duration: ~5 s

/**
 * Another program holds the gate's address (the port the gate was meant to take): the control plane asks it to prove
 * it holds the gate's token before sending that token, so neither a plain web server nor one that answers the
 * identity route with a made-up proof ever sees it.
 */
const servers: Server[] = [];

interface Foreign {
  url: string;
  requests: { method: string; url: string; headers: IncomingHttpHeaders }[];
}

async function foreignServer(identityAnswer: ((challenge: string) => unknown) | null): Promise<Foreign> {
  const requests: Foreign['requests'] = [];
  const server = createServer((request, response) => {
    requests.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers });
    const url = new URL(request.url ?? '/', 'http://foreign');
    if (identityAnswer && url.pathname === '/gate-identity') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(identityAnswer(url.searchParams.get('challenge') ?? '')));
      return;
    }
    // Answers everything, as a development server on the same port would.
    response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"ready":true,"service":"worker-gate"}');
  });
  servers.push(server);
  const port = await testPort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${port}`, requests };
}

async function controlPlaneFor(gateUrl: string): Promise<TestApp> {
  const file = ConfigFileSchema.parse({
    control_api_bearer_token: TEST_TOKEN,
    completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
    completion_callback_token: 'identity-test-callback-token-0123456789',
    worker_wake_gate_url: gateUrl,
    worker_wake_gate_bearer_token: GATE_TOKEN,
    state_dir: './unused-state',
    project_root: './unused-projects',
    dispatch_script_path: './unused-agent.sh',
  });
  return startTestApp({ dispatch: dispatchSettingsFrom({ ...file, research_provider_api_key: undefined }) });
}

const apps: TestApp[] = [];
afterAll(async () => {
  for (const app of apps) await app.close();
  for (const server of servers) server.close();
});

async function preflight(app: TestApp) {
  const response = await app.app.inject({ method: 'POST', url: '/control/api/preflight', headers: { authorization: `Bearer ${TEST_TOKEN}` }, payload: { require_paused: false } });
  expect(response.statusCode).toBe(200);
  const body = response.json() as { checks: { name: string; ok: boolean; detail?: string }[] };
  return body.checks.find((check) => check.name === 'wake_gate_dashboard_api')!;
}

function expectTokenNeverSent(foreign: Foreign) {
  expect(foreign.requests.length).toBeGreaterThan(0);
  for (const request of foreign.requests) {
    expect(request.headers.authorization, `${request.method} ${request.url}`).toBeUndefined();
    expect(JSON.stringify(request)).not.toContain(GATE_TOKEN);
  }
}

describe('the worker gate proves who it is before it receives its token', () => {
  let plain: Foreign;
  let forger: Foreign;
  let plainApp: TestApp;
  let forgerApp: TestApp;
  beforeAll(async () => {
    plain = await foreignServer(null);
    forger = await foreignServer((challenge) => ({ service: 'worker-gate', proof: Buffer.from(challenge).toString('base64url') }));
    plainApp = await controlPlaneFor(plain.url);
    forgerApp = await controlPlaneFor(forger.url);
    apps.push(plainApp, forgerApp);
  }, 60_000);

  it('a program that answers everything on the gate URL fails the preflight and never sees the token', async () => {
    const dashboard = await preflight(plainApp);
    expect(dashboard.ok).toBe(false);
    expect(dashboard.detail).toMatch(/^the gate did not answer \/dashboard\/api: http:\/\/127\.0\.0\.1:\d+ is not worker gate default, or holds another token \(.*\); its token was not sent/);
    for (const path of ['/healthz', '/gate-identity']) expect(plain.requests.map((request) => new URL(request.url, 'http://x').pathname)).toContain(path);
    expect(plain.requests.map((request) => request.url)).not.toContainEqual(expect.stringContaining('/dashboard/api'));
    // The status refresh asks the same gate.
    const status = await plainApp.app.inject({ method: 'GET', url: '/control/api/status?refresh_worker=true', headers: { authorization: `Bearer ${TEST_TOKEN}` } });
    expect(status.statusCode).toBe(200);
    expectTokenNeverSent(plain);
  });

  it('a program that answers the identity route with a proof it cannot compute never sees the token', async () => {
    const dashboard = await preflight(forgerApp);
    expect(dashboard.ok).toBe(false);
    expect(dashboard.detail).toMatch(/is not worker gate default, or holds another token \(its proof does not match the token\); its token was not sent/);
    expect(forger.requests.some((request) => request.url.startsWith('/gate-identity?challenge='))).toBe(true);
    expectTokenNeverSent(forger);
  });
});
