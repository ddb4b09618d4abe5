import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RouteObservability } from '../../platform/observability/route-observability.ts';
import { startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { parseExposition, sampleValue } from '../support/prometheus.ts';

async function scrapeApp(t: TestApp) {
  const response = await t.app.inject({ method: 'GET', url: '/metrics', headers: t.auth });
  expect(response.statusCode).toBe(200);
  expect(response.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(response.body);
}

describe('GET /metrics (docs/operations.md#metrics-and-observability)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t?.close());

  it('needs the bearer token like every other route', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(response.statusCode).toBe(401);
    expect(response.json()).toEqual({ detail: 'invalid bearer token' });
  });

  it('is a valid exposition whose request series move with requests, labelled by route template', async () => {
    const events = { route: '/control/api/v1/events', method: 'GET', status_code: '200' };
    const before = sampleValue(await scrapeApp(t), 'rcp_http_request_duration_seconds_count', events) ?? 0;
    for (let i = 0; i < 2; i++) expect((await t.app.inject({ method: 'GET', url: '/control/api/v1/events?page_size=1', headers: t.auth })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/control/api/projects/some-project-id', headers: t.auth })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: '/no/such/path/12345', headers: t.auth })).statusCode).toBe(404);

    const after = await scrapeApp(t);
    expect(sampleValue(after, 'rcp_http_request_duration_seconds_count', events)).toBe(before + 2);
    expect(sampleValue(after, 'rcp_http_request_duration_seconds_count', { route: '/control/api/projects/:project_id', status_code: '404' })).toBe(1);
    expect(sampleValue(after, 'rcp_http_request_duration_seconds_count', { route: 'unmatched', status_code: '404' })).toBe(1);
    // Label values are templates and fixed sets, never what a client sent.
    const labelValues = after.flatMap((sample) => Object.values(sample.labels));
    expect(labelValues.some((value) => value.includes('some-project-id') || value.includes('12345'))).toBe(false);
    expect(sampleValue(after, 'rcp_queue_items', { status: 'queued' })).toBe(0);
    expect(sampleValue(after, 'rcp_runs', { state: 'reconciled' })).toBe(0);
    expect(sampleValue(after, 'process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('counts dispatch outcomes', async () => {
    const before = sampleValue(await scrapeApp(t), 'rcp_dispatch_outcomes_total', { action: 'noop' }) ?? 0;
    const dry = await t.app.inject({ method: 'POST', url: '/control/dispatch-next', headers: t.auth, payload: { dry_run: true, requested_by: 'metrics-test' } });
    expect(dry.statusCode).toBe(200);
    expect(dry.json().action).toBe('noop');
    expect(sampleValue(await scrapeApp(t), 'rcp_dispatch_outcomes_total', { action: 'noop' })).toBe(before + 1);
  });
});

/** Sends a POST whose body arrives in two parts, `pauseMs` apart, and resolves with the status line. */
function slowPost(port: number, path: string, body: string, pauseMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    socket.on('end', () => resolve(answer.split('\r\n')[0]!));
    socket.on('error', reject);
    socket.write(
      `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${TEST_TOKEN}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body.slice(0, 5)}`,
    );
    setTimeout(() => socket.write(body.slice(5)), pauseMs);
  });
}

describe('route observability (route_observability_*)', () => {
  let t: TestApp;
  let dir: string;
  let logPath: string;
  let port: number;
  const ROTATE_AT = 2_000;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rcp-route-log-'));
    logPath = join(dir, 'logs', 'routes.jsonl');
    const routes = new RouteObservability({ path: logPath, slowMs: 300, memoryWarnRssMib: 1, rotateAtBytes: ROTATE_AT });
    t = await startTestApp({}, { server: { routeObservability: routes, memoryWarnRssMib: 1 } });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('warns about a request slower than route_observability_slow_ms and writes one line per request', async () => {
    expect(await slowPost(port, '/control/dispatch-next', JSON.stringify({ dry_run: true, requested_by: 'slow-client' }), 600)).toBe('HTTP/1.1 200 OK');
    const warning = t.logs.lines.map((line) => JSON.parse(line)).find((line) => line.msg === 'slow request (route_observability_slow_ms)');
    expect(warning).toMatchObject({ level: 40, route: '/control/dispatch-next', method: 'POST', status: 200, slow_ms: 300 });
    expect(warning.duration_ms).toBeGreaterThanOrEqual(500);

    const lines = readFileSync(logPath, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    expect(lines.at(-1)).toMatchObject({ route: '/control/dispatch-next', method: 'POST', status: 200, slow: true });
    expect(lines.at(-1).rss_mib).toBeGreaterThan(1);
    expect(statSync(logPath).mode & 0o777).toBe(0o600);
    // RSS is above the 1 MiB warning level on every request, but the warning comes once a minute, not per request.
    const memoryWarnings = t.logs.lines.filter((line) => line.includes('process RSS above route_observability_memory_warn_rss_mib'));
    expect(memoryWarnings).toHaveLength(1);
  });

  it('reports itself and the process memory on the v1 observability routes', async () => {
    const health = (await t.app.inject({ method: 'GET', url: '/control/api/v1/observability/health', headers: t.auth })).json();
    expect(health).toMatchObject({ enabled: true, log_path: logPath, slow_ms: 300, memory_warn_rss_mib: 1, memory_warnings: 1, last_write_error: null });
    expect(health.slow_requests).toBeGreaterThanOrEqual(1);
    expect(health.last_slow_request).toMatchObject({ route: '/control/dispatch-next', method: 'POST', status: 200 });
    const memory = (await t.app.inject({ method: 'GET', url: '/control/api/v1/observability/memory', headers: t.auth })).json();
    expect(memory).toMatchObject({ warn_rss_mib: 1, warning: true });
    expect(memory.rss_mib).toBeGreaterThan(memory.heap_used_mib);
  });

  it('rotates the log by size, keeping one older file', async () => {
    for (let i = 0; i < 40; i++) await t.app.inject({ method: 'GET', url: '/control/api/v1/events?page_size=1', headers: t.auth });
    const older = statSync(`${logPath}.1`).size;
    expect(older).toBeGreaterThanOrEqual(ROTATE_AT);
    expect(older).toBeLessThan(ROTATE_AT + 500);
    expect(statSync(logPath).size).toBeLessThan(ROTATE_AT + 500);
    const current = readFileSync(logPath, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    expect(current.at(-1)).toMatchObject({ route: '/control/api/v1/events', method: 'GET', status: 200 });
  });
});

describe('with route observability off', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t?.close());

  it('says so, and reports memory with no warning level', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/control/api/v1/observability/health', headers: t.auth })).json()).toEqual({ enabled: false });
    expect((await t.app.inject({ method: 'GET', url: '/control/api/v1/observability/memory', headers: t.auth })).json()).toMatchObject({ warn_rss_mib: 0, warning: false });
    expect((await t.app.inject({ method: 'GET', url: '/control/api/v1/observability/memory' })).statusCode).toBe(401);
  });
});
