import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, TEST_GATE_TOKEN, type TestApp } from './support/app.ts';

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
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; required?: boolean }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
  tags?: string[];
}
interface OpenApiDoc {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, { type: string; scheme?: string }> };
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
        const schema = response.content?.['application/json']?.schema as { required?: string[]; properties?: object };
        expect(schema.required).toContain('detail');
      }
    }
    const callback = operationOf('POST', '/control/api/worker-callback')!.responses;
    expect(Object.keys(callback)).toEqual(expect.arrayContaining(['200', '401', '409', '422']));
    expect(callback['200']!.content!['application/json']!.schema).toMatchObject({
      properties: { idempotency_key: { type: 'string' }, ignored: { type: 'boolean' } },
    });
  });
});
