import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlApiError, createControlClient, type ControlClient } from 'research-control-plane/client';
import { API_CLIENT_SCHEMA, apiClientSchemaSource } from '../../scripts/generate-api-client.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { testPort } from '../support/ports.ts';

// expected duration: ~20 s

/**
 * The typed client (`research-control-plane/client`, api-client/) against a real control plane on a port: its
 * generated types are those of the document the server serves, and its wrapper sends the token and a request id,
 * throws every error in one shape, replays a command by its idempotency key, and reads a cursor list to its end.
 */

let t: TestApp;
let baseUrl: string;
let client: ControlClient;
const sentIds: string[] = [];

beforeAll(async () => {
  t = await startTestApp();
  const port = await testPort();
  await t.app.listen({ host: '127.0.0.1', port });
  baseUrl = `http://127.0.0.1:${port}`;
  let n = 0;
  client = createControlClient({ baseUrl, token: TEST_TOKEN, requestId: () => sentIds[sentIds.push(`client-test-${++n}`) - 1]! });
});
afterAll(async () => {
  await t?.close();
});

const CANDIDATE = {
  title: 'Client paper',
  hypothesis: 'The method beats its baseline.',
  mechanism: 'A better method.',
  baseline_to_beat: 'The published baseline.',
  success_threshold: 'score above baseline',
  kill_condition: 'score below baseline',
  expected_artifacts: ['run_notes.md'],
  required_evidence: ['metrics'],
  estimated_runtime_class: 'minutes' as const,
  expected_token_budget: 100_000,
  likely_failure_modes: ['none'],
  dedupe_key: 'client-paper',
  novelty: 8,
  feasibility: 8,
  accessibility: 8,
  falsifiability: 8,
};

describe('the typed client', () => {
  it('has the types of the document the server serves (npm run client:generate writes them)', { timeout: 60_000 }, async () => {
    const response = await t.app.inject({ method: 'GET', url: '/control/api/openapi.json', headers: t.auth });
    const generated = await apiClientSchemaSource(JSON.parse(response.body));
    const committed = readFileSync(API_CLIENT_SCHEMA, 'utf8');
    expect(generated === committed, 'api-client/schema.ts differs from the served document: run npm run client:generate and commit it').toBe(true);
  });

  it('sends the token and a request id with each call, and answers the typed body', async () => {
    const { data, response } = await client.api.GET('/control/api/v1/runs', { params: { query: { page_size: 5 } } });
    expect(response.status).toBe(200);
    expect(data?.items).toEqual([]);
    expect(data?.page.has_more).toBe(false);
    expect(response.headers.get('x-request-id')).toBe(sentIds.at(-1));
  });

  it('throws every answer outside 2xx as a ControlApiError with its detail and request id', async () => {
    const refused = await client.data(client.api.GET('/control/api/v1/runs/{run_id}', { params: { path: { run_id: 'no-such-run' } } })).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ControlApiError);
    expect(refused).toMatchObject({ status: 404, requestId: sentIds.at(-1) });
    expect((refused as ControlApiError).message).toContain(`(request ${sentIds.at(-1)})`);

    // A query the server refuses: the fields it names are in the message.
    const invalid = await client
      .data(client.api.GET('/control/api/v1/runs', { params: { query: { page_size: 0 } } }))
      .catch((error: unknown) => error as ControlApiError);
    expect(invalid).toMatchObject({ status: 422 });
    expect((invalid as ControlApiError).message).toMatch(/^422: query\.page_size: /);

    const wrongToken = createControlClient({ baseUrl, token: 'not-the-token-0123456789abcdefgh' });
    const unauthorized = await wrongToken.data(wrongToken.api.GET('/control/api/status')).catch((error: unknown) => error as ControlApiError);
    expect(unauthorized).toMatchObject({ status: 401, requestId: expect.any(String) });
  });

  it('replays a command sent again with its idempotency key, and refuses the key with another payload', async () => {
    const key = client.idempotencyKey();
    const body = { requested_by: 'client', dry_run: false, idempotency_key: key, candidates: [CANDIDATE] };
    const first = await client.data(client.api.POST('/control/api/research/import-candidates', { body }));
    const again = await client.data(client.api.POST('/control/api/research/import-candidates', { body }));
    expect(again).toEqual(first);
    const other = await client
      .data(client.api.POST('/control/api/research/import-candidates', { body: { ...body, candidates: [{ ...CANDIDATE, dedupe_key: 'another' }] } }))
      .catch((error: unknown) => error as ControlApiError);
    expect(other).toMatchObject({ status: 409 });
    expect(client.idempotencyKey()).not.toBe(key);
  });

  it('reads a cursor list page after page to its end', async () => {
    const ids = Array.from({ length: 7 }, (_, i) => `client-project-${i}`);
    await t.store.transaction(async (tx) => {
      for (const id of ids) await insertProject(tx, { project_id: id, project_name: id, project_dir: id, workload_class: 'unknown' });
    });
    const before = sentIds.length;
    const seen: string[] = [];
    for await (const project of client.each('/control/api/v1/projects', { page_size: 2, sort: 'project_id', search: 'client-project-' })) seen.push(project.project_id);
    expect(seen).toEqual(ids);
    expect(sentIds.length - before).toBe(4);
  });
});
