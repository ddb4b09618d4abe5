import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, TEST_GATE_TOKEN, type TestApp } from '../support/app.ts';

// Both roles on one server, so the document must describe the worker gate's routes too.
let t: TestApp;
let doc: OpenApiDoc;
beforeAll(async () => {
  t = await startTestApp({}, { workerGate: true });
  const response = await t.app.inject({ method: 'GET', url: '/control/api/openapi.json', headers: t.auth });
  expect(response.statusCode).toBe(200);
  doc = response.json();
});
afterAll(async () => t.close());

interface Operation {
  operationId?: string;
  summary?: string;
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; required?: boolean; schema?: Record<string, unknown> }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
  responses: Record<string, { content?: Record<string, { schema: unknown }>; headers?: Record<string, unknown> }>;
  tags?: string[];
}
interface OpenApiDoc {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, { type: string; scheme?: string }>; schemas: Record<string, object> };
}

const openApiPath = (url: string) => url.replace(/:([A-Za-z_]+)/g, '{$1}');
const operationOf = (method: string, url: string) => doc.paths[openApiPath(url)]?.[method.toLowerCase()];

describe('the OpenAPI document', () => {
  it('is served to the control API token only', async () => {
    for (const headers of [{}, { authorization: `Bearer ${TEST_GATE_TOKEN}` }]) {
      const response = await t.app.inject({ method: 'GET', url: '/control/api/openapi.json', headers });
      expect(response.statusCode).toBe(401);
    }
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc) as unknown as Record<string, unknown>);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('documents every route of the server, the worker gate\'s included', () => {
    const routes = t.routes.filter((route) => route.method !== 'HEAD');
    expect(routes.map((route) => route.url)).toEqual(expect.arrayContaining(['/dispatch', '/control/api/openapi.json']));
    const missing = routes.filter((route) => operationOf(route.method, route.url) === undefined);
    expect(missing).toEqual([]);
    // HEAD is answered by the GET route of the same path.
    for (const route of t.routes.filter((route) => route.method === 'HEAD')) expect(operationOf('GET', route.url)).toBeDefined();
  });

  it('states the credentials of every route by its auth kind', () => {
    expect(doc.components.securitySchemes).toMatchObject({
      control_bearer: { type: 'http', scheme: 'bearer' },
      gate_bearer: { type: 'http', scheme: 'bearer' },
      callback_bearer: { type: 'http', scheme: 'bearer' },
      agent_run_bearer: { type: 'http', scheme: 'bearer' },
    });
    for (const route of t.routes.filter((route) => route.method !== 'HEAD')) {
      const security = operationOf(route.method, route.url)!.security;
      const schemes = new Set(security?.flatMap((requirement) => Object.keys(requirement)));
      switch (route.auth) {
        case 'public':
          expect(security).toEqual([]);
          break;
        case 'gate':
          expect(security).toEqual([{ gate_bearer: [] }]);
          break;
        case 'agent_event':
          expect(security).toEqual([{ agent_run_bearer: [] }, { control_bearer: [] }]);
          break;
        case 'callback':
          expect(security).toEqual([{ callback_bearer: [] }]);
          break;
        default:
          expect(security).toContainEqual({ control_bearer: [] });
          expect(schemes.has('gate_bearer')).toBe(false);
      }
    }
  });

  it('names path parameters, query parameters and request bodies', () => {
    for (const route of t.routes.filter((route) => route.method !== 'HEAD')) {
      const operation = operationOf(route.method, route.url)!;
      for (const [, name] of route.url.matchAll(/:([A-Za-z_]+)/g)) {
        expect(operation.parameters).toContainEqual(expect.objectContaining({ in: 'path', name, required: true }));
      }
    }
    const events = operationOf('GET', '/control/api/events')!;
    expect(events.parameters?.filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name)).toEqual(
      expect.arrayContaining(['page', 'page_size', 'entity_type', 'search']),
    );
    for (const [method, url] of [['POST', '/dispatch'], ['POST', '/control/dispatch-next'], ['POST', '/control/api/worker-callback']] as const) {
      expect(operationOf(method, url)!.requestBody?.content['application/json']?.schema).toMatchObject({ type: 'object' });
    }
    expect(operationOf('POST', '/dispatch')!.requestBody?.required).toBe(true);
    // A body with defaults may be left out.
    expect(operationOf('POST', '/control/api/runs/:run_id/cancel')!.requestBody?.required).toBe(false);
  });

  it('describes success and error answers, errors in the shared {detail} shape', () => {
    for (const route of t.routes.filter((route) => route.method !== 'HEAD')) {
      const responses = operationOf(route.method, route.url)!.responses;
      expect(Object.keys(responses).some((status) => status.startsWith('2') || status.startsWith('3'))).toBe(true);
      if (route.auth !== 'public') expect(responses['401']).toBeDefined();
      for (const [status, response] of Object.entries(responses)) {
        // Health routes answer 503 with their health body.
        if (!/^[45]/.test(status) || (status === '503' && /health/.test(route.url))) continue;
        const schema = response.content?.['application/json']?.schema as { $ref?: string; required?: string[] };
        // Every error answer refers to the one error shape, a component of the document.
        expect(schema.$ref ?? (schema as { allOf?: { $ref?: string }[] }).allOf?.[0]?.$ref, `${route.method} ${route.url} ${status}`).toBe('#/components/schemas/ErrorBody');
      }
    }
    expect(doc.components.schemas.ErrorBody).toMatchObject({ type: 'object', required: ['detail'], properties: { detail: { anyOf: expect.any(Array) } } });
    const callback = operationOf('POST', '/control/api/worker-callback')!.responses;
    expect(Object.keys(callback)).toEqual(expect.arrayContaining(['200', '401', '409', '422']));
    expect(callback['200']!.content!['application/json']!.schema).toMatchObject({
      properties: { idempotency_key: { type: 'string' }, ignored: { type: 'boolean' } },
    });
  });

  it('names every operation once, after what it does, with a summary; HEAD as its GET with no body', () => {
    const operations = Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ method, path, operation })));
    const ids = operations.map(({ operation }) => operation.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(operations.filter(({ operation }) => !operation.summary)).toEqual([]);
    expect(operationOf('POST', '/control/dispatch-next')!.operationId).toBe('dispatchNext');
    for (const [path, methods] of Object.entries(doc.paths)) {
      if (!methods.get) continue;
      const head = methods.head!;
      expect(head.operationId, path).toBe(`${methods.get.operationId}Headers`);
      expect(Object.keys(head.responses)).toEqual(Object.keys(methods.get.responses));
      expect(Object.values(head.responses).every((response) => response.content === undefined)).toBe(true);
    }
  });

  it('lists the global answers on every operation that can give them, with their headers', () => {
    for (const route of t.routes.filter((route) => route.method !== 'HEAD')) {
      const { responses } = operationOf(route.method, route.url)!;
      const label = `${route.method} ${route.url}`;
      expect(Object.keys(responses), label).toEqual(expect.arrayContaining(['400', '408', '421', '422', '431', '500']));
      if (route.auth !== 'public') expect(Object.keys(responses), label).toEqual(expect.arrayContaining(['401', '429']));
      if (route.method !== 'GET') expect(Object.keys(responses), label).toEqual(expect.arrayContaining(['413', '415']));
      if (route.url.includes('/:')) expect(Object.keys(responses), label).toContain('404');
      for (const [status, response] of Object.entries(responses)) {
        expect(Object.keys(response.headers ?? {}), `${label} ${status}`).toContain('X-Request-Id');
      }
      if (responses['401']) expect(Object.keys(responses['401'].headers!)).toContain('WWW-Authenticate');
      if (responses['429']) expect(Object.keys(responses['429'].headers!)).toContain('Retry-After');
      expect(responses['500']!.content!['application/json']!.schema).toMatchObject({ required: expect.arrayContaining(['detail', 'request_id']) });
    }
    expect(Object.keys(operationOf('POST', '/control/api/session')!.responses['200']!.headers!)).toContain('Set-Cookie');
    expect(Object.keys(operationOf('GET', '/dashboard')!.responses['307']!.headers!)).toContain('Location');
  });

  it('types query parameters as strictly as the server reads them: ranged integers and enumerated sorts', () => {
    const queryOf = (url: string, name: string) => operationOf('GET', url)!.parameters!.find((parameter) => parameter.in === 'query' && parameter.name === name)!.schema!;
    expect(queryOf('/control/api/v1/runs', 'page_size')).toEqual({ type: 'integer', minimum: 1, maximum: 200 });
    expect(queryOf('/control/api/events', 'page')).toEqual({ type: 'integer', minimum: 1, maximum: 1_000_000 });
    expect(queryOf('/control/api/queues/:queue', 'sort')).toMatchObject({ type: 'string', enum: expect.arrayContaining(['dispatch_priority', '-dispatch_priority']) });
    expect(queryOf('/control/api/papers', 'sort')).toMatchObject({ enum: expect.arrayContaining(['-updated_at', 'title']) });
  });

  it('states in each request body the rules the server adds: a key on a live call, a note with a failed checklist item', () => {
    const bodySchema = (url: string) => structuredClone(operationOf('POST', url)!.requestBody!.content['application/json']!.schema) as object;
    const ajv = new Ajv2020({ strict: false });
    for (const url of ['/control/api/research/promote-candidate', '/control/api/research/generate-provider-batch', '/control/api/v1/followups/launch-next', '/control/api/research/run-cycle']) {
      const valid = ajv.compile(bodySchema(url));
      const base = url.endsWith('promote-candidate') ? { candidate_id: 'cand-1', requested_by: 'ops' } : { requested_by: 'ops' };
      expect(valid(base), url).toBe(true);
      expect(valid({ ...base, dry_run: true }), url).toBe(true);
      expect(valid({ ...base, dry_run: false }), url).toBe(false);
      expect(valid({ ...base, dry_run: false, idempotency_key: 'k-1' }), url).toBe(true);
    }
    const checklist = ajv.compile(bodySchema('/control/api/publication-automation/:paper_id/checklist/:item_id'));
    const item = { idempotency_key: 'k-2', requested_by: 'ops' };
    expect(checklist({ ...item, status: 'pass' })).toBe(true);
    expect(checklist({ ...item, status: 'fail' })).toBe(false);
    expect(checklist({ ...item, status: 'accepted_risk', note: '  ' })).toBe(false);
    expect(checklist({ ...item, status: 'fail', note: 'the numbers do not reproduce' })).toBe(true);
  });
});
