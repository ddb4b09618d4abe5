import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthKind } from '../../api/auth.ts';
import { createServer, createWorkerGateServer, type RegisteredRoute } from '../../api/create-server.ts';
import { createLogger } from '../../platform/observability/logger.ts';
import { ConfigFileSchema, SECRET_FIELDS } from '../../platform/config/schema.ts';
import { openStore } from '../../platform/store/open-store.ts';
import type { Store } from '../../platform/store/store.ts';
import { WorkerGate } from '../../worker-gate/worker-gate.ts';
import { httpOnlyDeps, LogCapture, NO_WORKERS, TEST_GATE_TOKEN, TEST_TOKEN } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * Every route of the route table × every credential × several spellings of its path, against the answer the route's
 * declared auth kind calls for (docs/security.md#security-model). A route added later is covered without touching this file.
 */

const CALLBACK_TOKEN = NO_WORKERS.completionCallbackToken;
const CREDENTIALS = ['none', 'control', 'gate', 'callback', 'run_token', 'other_run_token', 'session', 'session_csrf'] as const;
type Credential = (typeof CREDENTIALS)[number];
type Expected = 'allowed' | 401 | 403;
type ServerShape = 'both_roles' | 'gate_only';
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** What a credential gets on a route of `kind`; `undefined` is a path no route matched. */
function expectedAnswer(shape: ServerShape, kind: AuthKind | undefined, credential: Credential, method: string): Expected {
  // Dashboard sessions live in the control plane's store: a gate serving alone has none.
  const sessions = shape === 'both_roles';
  const controlOrSession = (): Expected => {
    if (credential === 'control' || (sessions && credential === 'session_csrf')) return 'allowed';
    if (sessions && credential === 'session') return SAFE.has(method) ? 'allowed' : 403;
    return 401;
  };
  switch (kind) {
    case 'public':
      return 'allowed';
    case 'control':
      return controlOrSession();
    case 'gate':
      return credential === 'gate' ? 'allowed' : 401;
    case 'agent_event':
      return credential === 'control' || credential === 'run_token' ? 'allowed' : 401;
    case 'callback':
      return credential === 'callback' ? 'allowed' : 401;
    case undefined:
      if (shape === 'both_roles') return controlOrSession();
      return credential === 'control' || credential === 'gate' ? 'allowed' : 401;
  }
}

/** The path as written, a letter of it percent-encoded, with a trailing slash, and with a doubled slash. */
function spellings(url: string): { spelling: string; url: string; routed: boolean }[] {
  const concrete = url.replace(/:[A-Za-z_]+/g, 'x');
  const letter = /[a-z]/.exec(concrete.slice(1));
  const at = (letter?.index ?? 0) + 1;
  const encoded = `${concrete.slice(0, at)}%${concrete.charCodeAt(at).toString(16)}${concrete.slice(at + 1)}`;
  return [
    { spelling: 'exact', url: concrete, routed: true },
    { spelling: 'percent-encoded', url: encoded, routed: true },
    { spelling: 'trailing slash', url: `${concrete}/`, routed: false },
    { spelling: 'doubled slash', url: `/${concrete}`, routed: false },
  ];
}

const AGENT_SCRIPT = `#!/bin/sh
printf '%s' "$GATE_EVENT_TOKEN" > "$PROJECT_DIR/agent-token"
sleep 600 >/dev/null 2>&1 &
echo "{\\"root_pid\\": $!}"
`;

interface Fixture {
  dir: string;
  gate: WorkerGate;
  store: Store;
  database: TestDatabase;
  bothRoles: { app: FastifyInstance; routes: RegisteredRoute[] };
  gateOnly: { app: FastifyInstance; routes: RegisteredRoute[] };
  /** The two dispatched runs: the matrix posts events for the first; the second's token is "another run's". */
  runIds: [string, string];
  runTokens: [string, string];
}

let f: Fixture;
let nextAddress = 0;
/** Each request from its own client address, so the sign-in rate limit never stands in for an auth answer. */
const clientAddress = () => {
  nextAddress += 1;
  return `10.${(nextAddress >> 16) & 255}.${(nextAddress >> 8) & 255}.${nextAddress & 255}`;
};

async function dispatchRun(app: FastifyInstance, runId: string): Promise<string> {
  const gateAuth = { authorization: `Bearer ${TEST_GATE_TOKEN}` };
  const project = { run_id: runId, project_id: runId, project_dir: runId, prompt_file: 'prompt.md' };
  const prepared = await app.inject({ method: 'POST', url: '/prepare-project', headers: gateAuth, payload: { ...project, prompt_text: 'matrix' } });
  expect(prepared.statusCode, prepared.body).toBe(200);
  const dispatched = await app.inject({ method: 'POST', url: '/dispatch', headers: gateAuth, payload: project });
  expect(dispatched.statusCode, dispatched.body).toBe(200);
  return readFileSync(join(f.dir, 'projects', runId, 'agent-token'), 'utf8');
}

async function signIn(app: FastifyInstance): Promise<{ cookie: string; csrf: string }> {
  const response = await app.inject({ method: 'POST', url: '/control/api/session', payload: { token: TEST_TOKEN }, remoteAddress: clientAddress() });
  expect(response.statusCode, response.body).toBe(200);
  const cookie = String(response.headers['set-cookie']).split(';')[0]!;
  return { cookie, csrf: (response.json() as { csrf_token: string }).csrf_token };
}

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rcp-auth-matrix-'));
  const script = join(dir, 'agent.sh');
  writeFileSync(script, AGENT_SCRIPT);
  chmodSync(script, 0o755);
  const logger = createLogger({ level: 'warn', secretConfigFields: SECRET_FIELDS, destination: new LogCapture() });
  const config = ConfigFileSchema.parse({
    roles: ['control_plane', 'worker_gate'],
    control_api_bearer_token: TEST_TOKEN,
    worker_wake_gate_bearer_token: TEST_GATE_TOKEN,
    completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
    completion_callback_token: CALLBACK_TOKEN,
    state_dir: join(dir, 'state'),
    project_root: join(dir, 'projects'),
    dispatch_script_path: script,
    // The matrix dispatches a run for each agent token it tries, and they run side by side.
    run_slots: 4,
  });
  const gate = new WorkerGate({ config, logger, eventUrl: () => 'http://127.0.0.1:9/legacy-agent/event' });
  await gate.start();
  const database = await createTestDatabase();
  const store = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
  const role = { gate, token: TEST_GATE_TOKEN };
  const bothRoutes: RegisteredRoute[] = [];
  const gateRoutes: RegisteredRoute[] = [];
  // A Temporal that knows no cycle: following one answers 404, which this matrix counts as let in.
  const noCycles = { ...httpOnlyDeps(store).cycles, cycleProgress: async () => null };
  const bothApp = await createServer(httpOnlyDeps(store, { workerGateReady: () => gate.isReady(), cycles: noCycles }), logger, {
    workerGate: role,
    onRoute: (route) => bothRoutes.push(route),
  });
  const gateApp = await createWorkerGateServer(TEST_TOKEN, role, logger, { onRoute: (route) => gateRoutes.push(route), checkAnswers: true });
  f = {
    dir,
    gate,
    store,
    database,
    bothRoles: { app: bothApp, routes: bothRoutes },
    gateOnly: { app: gateApp, routes: gateRoutes },
    runIds: ['matrix-run-a-20261122T000000Z', 'matrix-run-b-20261122T000000Z'],
    runTokens: ['', ''],
  };
  f.runTokens = [await dispatchRun(bothApp, f.runIds[0]), await dispatchRun(bothApp, f.runIds[1])];
});

afterAll(async () => {
  if (!f) return;
  const gateAuth = { authorization: `Bearer ${TEST_GATE_TOKEN}` };
  for (const runId of f.runIds) await f.bothRoles.app.inject({ method: 'POST', url: `/runs/${runId}/cancel`, headers: gateAuth });
  await f.bothRoles.app.close();
  await f.gateOnly.app.close();
  await f.gate.stop();
  await f.store.close();
  await f.database.drop();
  rmSync(f.dir, { recursive: true, force: true });
});

function headersFor(credential: Credential, session: { cookie: string; csrf: string } | undefined): Record<string, string> {
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  switch (credential) {
    case 'none':
      return {};
    case 'control':
      return bearer(TEST_TOKEN);
    case 'gate':
      return bearer(TEST_GATE_TOKEN);
    case 'callback':
      return bearer(CALLBACK_TOKEN);
    case 'run_token':
      return bearer(f.runTokens[0]);
    case 'other_run_token':
      return bearer(f.runTokens[1]);
    case 'session':
      return { cookie: session!.cookie };
    case 'session_csrf':
      return { cookie: session!.cookie, 'x-csrf-token': session!.csrf };
  }
}

function bodyFor(route: RegisteredRoute): InjectOptions['payload'] {
  if (SAFE.has(route.method)) return undefined;
  // The event the first run's agent would post: only its own token (or the control token) may post it.
  if (route.url === '/legacy-agent/event') return { event: 'session-start', run_id: f.runIds[0] };
  return {};
}

/** Sign-out ends the session the rest of the walk uses, so it goes last. */
const signOutLast = (routes: RegisteredRoute[]) =>
  [...routes].sort((a, b) => Number(a.method === 'DELETE' && a.url === '/control/api/session') - Number(b.method === 'DELETE' && b.url === '/control/api/session'));

async function walk(shape: ServerShape): Promise<string[]> {
  const { app, routes } = shape === 'both_roles' ? f.bothRoles : f.gateOnly;
  const mismatches: string[] = [];
  for (const credential of CREDENTIALS) {
    for (const spellingIndex of [0, 1, 2, 3]) {
      // A fresh session per pass: a sign-out in the previous pass has ended the last one.
      const session = credential.startsWith('session') ? await signIn(f.bothRoles.app) : undefined;
      for (const route of signOutLast(routes)) {
        const { spelling, url, routed } = spellings(route.url)[spellingIndex]!;
        const expected = expectedAnswer(shape, routed ? route.auth : undefined, credential, route.method);
        const response = await app.inject({
          method: route.method as InjectOptions['method'],
          url,
          headers: headersFor(credential, session),
          payload: bodyFor(route),
          remoteAddress: clientAddress(),
        });
        const status = response.statusCode;
        const ok =
          expected === 'allowed'
            ? status !== 401 && status !== 403 && status < 500
            : status === expected && (expected !== 401 || response.headers['www-authenticate'] === 'Bearer');
        if (!ok) mismatches.push(`${shape}: ${route.method} ${url} (${spelling}) with ${credential}: expected ${expected}, got ${status} ${response.body.slice(0, 120)}`);
      }
    }
  }
  return mismatches;
}

/**
 * Bodies no route takes: a NUL character (refused by every route), JSON that does not parse, fields of the wrong
 * types, and a body that is no object. Each names the first run, as an agent posting for that run would.
 */
const malformedBodies = (runId: string): { name: string; payload: string }[] => [
  { name: 'NUL character', payload: JSON.stringify({ event: 'session-start\u0000', run_id: runId, idempotency_key: 'k\u0000' }) },
  { name: 'invalid JSON', payload: `{"event": "session-start", "run_id": "${runId}"` },
  { name: 'wrong types', payload: JSON.stringify({ event: 7, run_id: runId, idempotency_key: [], dry_run: 'yes' }) },
  { name: 'not an object', payload: JSON.stringify([runId]) },
];

/** Every route × every credential it refuses × every malformed body (and a NUL in the query): the refusal, never a 4xx about the input. */
async function walkMalformed(shape: ServerShape): Promise<string[]> {
  const { app, routes } = shape === 'both_roles' ? f.bothRoles : f.gateOnly;
  const mismatches: string[] = [];
  for (const credential of CREDENTIALS) {
    const session = credential.startsWith('session') ? await signIn(f.bothRoles.app) : undefined;
    for (const route of signOutLast(routes)) {
      const expected = expectedAnswer(shape, route.auth, credential, route.method);
      if (expected === 'allowed') continue;
      const { url } = spellings(route.url)[0]!;
      for (const { name, payload } of malformedBodies(f.runIds[0])) {
        for (const target of [url, `${url}?note=%00`]) {
          const response = await app.inject({
            method: route.method as InjectOptions['method'],
            url: target,
            headers: { ...headersFor(credential, session), 'content-type': 'application/json' },
            payload,
            remoteAddress: clientAddress(),
          });
          const ok = response.statusCode === expected && (expected !== 401 || response.headers['www-authenticate'] === 'Bearer');
          if (!ok) mismatches.push(`${shape}: ${route.method} ${target} with ${credential} and ${name}: expected ${expected}, got ${response.statusCode} ${response.body.slice(0, 120)}`);
        }
      }
    }
  }
  return mismatches;
}

describe('authentication comes before the body: a refused credential is refused whatever the body holds', () => {
  it('on every route of the server that serves both roles', async () => {
    expect(await walkMalformed('both_roles')).toEqual([]);
  });

  it('on every route of a gate-only server', async () => {
    expect(await walkMalformed('gate_only')).toEqual([]);
  });

  it("lets a run's own token reach validation only once its body names that run", async () => {
    const post = (payload: string) =>
      f.gateOnly.app.inject({
        method: 'POST',
        url: '/legacy-agent/event',
        headers: { authorization: `Bearer ${f.runTokens[0]}`, 'content-type': 'application/json' },
        payload,
      });
    const [nul, invalidJson, wrongTypes, notAnObject] = malformedBodies(f.runIds[0]).map((body) => body.payload);
    // Its own run named: the body's own faults are answered.
    expect((await post(nul!)).statusCode).toBe(422);
    expect((await post(wrongTypes!)).statusCode).toBe(422);
    // A body that does not parse, or is no object, never shows the run: the token has not been shown to cover it.
    expect((await post(invalidJson!)).statusCode).toBe(401);
    expect((await post(notAnObject!)).statusCode).toBe(401);
    // Another run named, whatever else the body holds.
    for (const body of malformedBodies(f.runIds[1])) expect((await post(body.payload)).statusCode, body.name).toBe(401);
  });
});

describe('auth matrix: every route × every credential × every path spelling', () => {
  it('collected both route tables, with a route of every auth kind', () => {
    const kinds = new Set(f.bothRoles.routes.map((route) => route.auth));
    expect([...kinds].sort()).toEqual(['agent_event', 'callback', 'control', 'gate', 'public']);
    expect(f.gateOnly.routes.map((route) => `${route.method} ${route.url}`)).toEqual(
      expect.arrayContaining(['GET /healthz', 'POST /dispatch', 'POST /legacy-agent/event']),
    );
    expect(f.runTokens[0]).not.toBe(f.runTokens[1]);
  });

  it('answers as the route\'s auth kind says on the server that serves both roles', async () => {
    expect(await walk('both_roles')).toEqual([]);
  });

  it('answers as the route\'s auth kind says on a gate-only server', async () => {
    expect(await walk('gate_only')).toEqual([]);
  });
});
