import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlClient, reserveControlPlane, startControlPlaneProcess, writeControlPlaneConfig, type ControlPlaneProcess } from '../support/control-plane.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { waitUntil } from '../support/gate.ts';

// expected duration: ~20 s (one control plane, one cycle, a batch of spans)

/**
 * OpenTelemetry tracing (docs/http.md#request-ids, tracing): a control plane with otel_exporter_otlp_endpoint set sends
 * the spans of a research cycle (the client's start, the workflow, its activities) over OTLP/HTTP to a collector the
 * test runs.
 */

let collector: Server;
let collectorUrl: string;
const spanNames: string[] = [];
let database: TestDatabase;
let control: ControlPlaneProcess;
let api: ReturnType<typeof controlClient>;

/** Every span name in an OTLP/HTTP JSON export. */
function namesIn(body: string): string[] {
  const exported = JSON.parse(body) as { resourceSpans?: { scopeSpans?: { spans?: { name: string }[] }[] }[] };
  return (exported.resourceSpans ?? []).flatMap((resource) => (resource.scopeSpans ?? []).flatMap((scope) => (scope.spans ?? []).map((span) => span.name)));
}

beforeAll(async () => {
  collector = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      if (request.url === '/v1/traces') spanNames.push(...namesIn(body));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  collectorUrl = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;
  database = await createTestDatabase();
  const fixture = await writeControlPlaneConfig(await reserveControlPlane(), { databaseUrl: database.url, overrides: { otel_exporter_otlp_endpoint: collectorUrl } });
  control = await startControlPlaneProcess(fixture);
  api = controlClient(fixture.url);
}, 120_000);

afterAll(async () => {
  await control?.kill('SIGTERM');
  await database?.drop();
  collector?.closeAllConnections();
  await new Promise((resolve) => collector?.close(resolve));
});

describe('tracing', () => {
  it('sends the spans of a cycle: the start, the workflow and its activities', { timeout: 60_000 }, async () => {
    expect(control.output()).toContain(`tracing workflows and activities to ${collectorUrl} (OTLP/HTTP)`);
    const started = await api('POST', '/control/api/research/run-cycle', {
      requested_by: 'tracing-test',
      dry_run: false,
      enabled: true,
      idempotency_key: 'traced-cycle',
      max_provider_requests_per_run: 0,
      max_promotions_per_run: 0,
    });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    // Spans leave in batches, every few seconds.
    await waitUntil('the cycle\'s spans at the collector', () => {
      const names = new Set(spanNames);
      return ['StartWorkflow:researchCycleWorkflow', 'RunWorkflow:researchCycleWorkflow', 'RunActivity:cycleStopConditions'].every((name) => names.has(name)) ? true : undefined;
    }, 30_000, 500).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}; spans seen: ${[...new Set(spanNames)].join(', ')}`);
    });
  });
});
