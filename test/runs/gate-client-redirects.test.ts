import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigFileSchema } from '../../platform/config/schema.ts';
import { dispatchSettingsFrom } from '../../capabilities/runs/dispatch-settings.ts';
import { startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { GATE_TOKEN } from '../support/gate.ts';
import { testPort } from '../support/ports.ts';

// Issue 32, L6: a compromised worker answered the control plane's gate calls with 307 to an address of its choice,
// and the control plane followed (blind SSRF). The gate client must refuse redirects: a 3xx is a gate error.
const servers: Server[] = [];
let victimHits: string[];
let cp: TestApp;
let cpUrl: string;

async function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  const port = await testPort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return `http://127.0.0.1:${port}`;
}

beforeAll(async () => {
  victimHits = [];
  const victim = await listen((request, response) => {
    victimHits.push(`${request.method} ${request.url}`);
    response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"ready":true}');
  });
  const compromisedGate = await listen((request, response) => {
    response.writeHead(307, { location: `${victim}/internal-only${request.url}` }).end();
  });
  const file = ConfigFileSchema.parse({
    control_api_bearer_token: TEST_TOKEN,
    completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
    completion_callback_token: 'redirect-test-callback-token-0123456789',
    worker_wake_gate_url: compromisedGate,
    worker_wake_gate_bearer_token: GATE_TOKEN,
    state_dir: './unused-state',
    project_root: './unused-projects',
    dispatch_script_path: './unused-agent.sh',
  });
  cp = await startTestApp({ dispatch: dispatchSettingsFrom({ ...file, research_provider_api_key: undefined }) });
  const port = await testPort();
  await cp.app.listen({ host: '127.0.0.1', port });
  cpUrl = `http://127.0.0.1:${port}`;
}, 60_000);

afterAll(async () => {
  await cp?.close();
  for (const server of servers) server.close();
});

describe('a worker gate that answers with redirects (issue 32, L6)', () => {
  it('is reported as a gate error by the preflight, and the address it names is never called', async () => {
    const response = await fetch(`${cpUrl}/control/api/preflight`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ require_paused: false }),
    });
    const body = (await response.json()) as { ok: boolean; checks: { name: string; ok: boolean; detail?: string; message?: string }[] };
    expect(response.status).toBe(200);
    expect(body.ok).toBe(false);
    const healthz = body.checks.find((check) => check.name === 'wake_gate_healthz');
    expect(healthz).toMatchObject({ ok: false });
    expect(JSON.stringify(healthz)).toMatch(/307; redirects are not followed/);
    expect(victimHits).toEqual([]);
  });
});
