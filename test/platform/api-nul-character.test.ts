import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RegisteredRoute } from '../../api/create-server.ts';
import { NO_WORKERS, startTestApp, TEST_GATE_TOKEN, type TestApp } from '../support/app.ts';

// Both roles on one server, so the walk covers the worker gate's routes too.
let t: TestApp;
let doc: { paths: Record<string, Record<string, Operation>> };
beforeAll(async () => {
  t = await startTestApp({}, { workerGate: true });
  doc = (await t.app.inject({ method: 'GET', url: '/control/api/openapi.json', headers: t.auth })).json();
});
afterAll(async () => t.close());

interface JsonSchema {
  type?: string;
  anyOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
}
interface Operation {
  parameters?: { in: string; name: string }[];
  requestBody?: { content: Record<string, { schema: JsonSchema }> };
}

interface Problem {
  loc: (string | number)[];
  msg: string;
  type: string;
}

const operationOf = (route: RegisteredRoute) =>
  doc.paths[route.url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[route.method.toLowerCase()];

const credentialsFor = (route: RegisteredRoute): Record<string, string> => {
  if (route.auth === 'public') return {};
  if (route.auth === 'gate') return { authorization: `Bearer ${TEST_GATE_TOKEN}` };
  if (route.auth === 'callback') return { authorization: `Bearer ${NO_WORKERS.completionCallbackToken}` };
  return t.auth;
};

const pathWith = (url: string, values: Record<string, string> = {}) =>
  url.replace(/:([A-Za-z_]+)/g, (_match, name: string) => values[name] ?? 'x');

const isText = (schema: JsonSchema): boolean => schema.type === 'string' || (schema.anyOf ?? []).some(isText);

/** A body field to carry the NUL: a text field of the body schema where there is one. */
const bodyFieldOf = (operation: Operation | undefined) => {
  const properties = operation?.requestBody?.content['application/json']?.schema.properties ?? {};
  const names = Object.keys(properties);
  return names.find((name) => isText(properties[name]!)) ?? names[0] ?? 'text';
};

type Route = RegisteredRoute & { method: 'GET' | 'POST' | 'DELETE' | 'HEAD' };

async function send(route: RegisteredRoute, url: string, payload?: unknown) {
  return t.app.inject({
    method: (route as Route).method,
    url,
    headers: credentialsFor(route),
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
}

/** 422 with a `nul_character` problem at `loc` (a HEAD answer has no body to read it from). */
function expectNulRefused(response: Awaited<ReturnType<typeof send>>, loc: (string | number)[], what: string) {
  expect(response.statusCode, what).toBe(422);
  if (response.body === '') return;
  const detail = (response.json() as { detail: Problem[] }).detail;
  expect(detail, what).toContainEqual({ loc, msg: expect.stringContaining('NUL'), type: 'nul_character' });
}

describe('the NUL character in a request', () => {
  const routes = () => t.routes;

  it('walks a table with query, path and body schemas on both roles', () => {
    const withInput = routes().filter((route) => {
      const operation = operationOf(route);
      return (operation?.parameters?.length ?? 0) > 0 || operation?.requestBody !== undefined;
    });
    expect(withInput.map((route) => `${route.method} ${route.url}`)).toEqual(
      expect.arrayContaining(['GET /control/api/events', 'POST /dispatch', 'POST /runs/:run_id/cancel', 'POST /legacy-agent/event']),
    );
  });

  it('is refused with 422 in every declared query parameter, path parameter and body of every route, never 500', async () => {
    let checked = 0;
    for (const route of routes()) {
      const operation = operationOf(route.method === 'HEAD' ? { ...route, method: 'GET' } : route);
      const what = `${route.method} ${route.url}`;
      for (const parameter of operation?.parameters ?? []) {
        if (parameter.in === 'query') {
          const response = await send(route, `${pathWith(route.url)}?${encodeURIComponent(parameter.name)}=a%00b`);
          expectNulRefused(response, ['query', parameter.name], `${what} ?${parameter.name}`);
        } else if (parameter.in === 'path') {
          const response = await send(route, pathWith(route.url, { [parameter.name]: 'a%00b' }));
          expectNulRefused(response, ['path', parameter.name], `${what} :${parameter.name}`);
        } else {
          continue;
        }
        checked += 1;
      }
      if (operation?.requestBody) {
        const field = bodyFieldOf(operation);
        const response = await send(route, pathWith(route.url), { [field]: 'a\u0000b' });
        expectNulRefused(response, ['body', field], `${what} body.${field}`);
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThan(20);
  });

  it('is refused with 422 in the query of every route, one that declares no query included', async () => {
    for (const route of routes()) {
      const response = await send(route, `${pathWith(route.url)}?unexpected=%00`);
      expectNulRefused(response, ['query', 'unexpected'], `${route.method} ${route.url}`);
    }
  });

  it('answers the reported GET /control/api/events?search=%00 with 422, not a database error', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/control/api/events?search=%00', headers: t.auth });
    expect(response.statusCode).toBe(422);
    expect(response.json()).toEqual({
      detail: [{ loc: ['query', 'search'], msg: 'must not contain the NUL character (U+0000)', type: 'nul_character' }],
    });
    const ok = await t.app.inject({ method: 'GET', url: '/control/api/events?search=ok', headers: t.auth });
    expect(ok.statusCode).toBe(200);
  });

  it('finds it in a JSON body at any depth, in keys too, as \\u0000 in the JSON text', async () => {
    const headers = { ...t.auth, 'content-type': 'application/json' };
    const nested = await t.app.inject({
      method: 'POST',
      url: '/control/api/research/import-candidates',
      headers,
      payload: '{"candidates":[{"title":"fine","notes":{"deep":["ok","bad\\u0000"]}}]}',
    });
    expect(nested.statusCode).toBe(422);
    expect(nested.json().detail).toEqual([
      { loc: ['body', 'candidates', 0, 'notes', 'deep', 1], msg: 'must not contain the NUL character (U+0000)', type: 'nul_character' },
    ]);

    const key = await t.app.inject({ method: 'POST', url: '/control/dispatch-next', headers, payload: '{"dry_run":true,"a\\u0000":1}' });
    expect(key.statusCode).toBe(422);
    expect(key.json().detail).toEqual([
      { loc: ['body', 'a\u0000'], msg: 'field name must not contain the NUL character (U+0000)', type: 'nul_character' },
    ]);

    const top = await t.app.inject({ method: 'POST', url: '/legacy-agent/event', headers, payload: '"\\u0000"' });
    expect(top.statusCode).toBe(422);
    expect(top.json().detail).toEqual([{ loc: ['body'], msg: 'must not contain the NUL character (U+0000)', type: 'nul_character' }]);
  });

  it('refuses an unpaired surrogate the same way (Postgres cannot store it), and keeps a paired one', async () => {
    const headers = { ...t.auth, 'content-type': 'application/json' };
    const lone = await t.app.inject({ method: 'POST', url: '/control/pause', headers, payload: '{"reason":"\\ud800","paused_by":"fuzz"}' });
    expect(lone.statusCode).toBe(422);
    expect(lone.json().detail).toEqual([
      { loc: ['body', 'reason'], msg: 'must not contain an unpaired UTF-16 surrogate (not valid Unicode text)', type: 'unpaired_surrogate' },
    ]);
    const trailing = await t.app.inject({ method: 'POST', url: '/control/pause', headers, payload: '{"reason":"ok","paused_by":"x\\udc00"}' });
    expect(trailing.json().detail).toEqual([expect.objectContaining({ loc: ['body', 'paused_by'], type: 'unpaired_surrogate' })]);
    const paired = await t.app.inject({ method: 'POST', url: '/control/pause', headers, payload: '{"reason":"a rocket \\ud83d\\ude80","paused_by":"fuzz"}' });
    expect(paired.statusCode, paired.body).toBe(200);
    await t.app.inject({ method: 'POST', url: '/control/resume', headers, payload: { resumed_by: 'fuzz' } });
  });

  it('answers at most 20 entries, however many NULs a body holds', async () => {
    const headers = { ...t.auth, 'content-type': 'application/json' };
    const manyStrings = JSON.stringify({ dry_run: true, list: Array.from({ length: 100 }, () => '\u0000') });
    const manyKeys = JSON.stringify(Object.fromEntries(Array.from({ length: 100 }, (_, index) => [`k${index}\u0000`, 1])));
    for (const payload of [manyStrings, manyKeys]) {
      const response = await t.app.inject({ method: 'POST', url: '/control/dispatch-next', headers, payload });
      expect(response.statusCode).toBe(422);
      expect(response.json().detail).toHaveLength(20);
    }
  });

  it('survives a body nested deeper than the call stack', async () => {
    const depth = 200_000;
    const payload = `${'['.repeat(depth)}"\\u0000"${']'.repeat(depth)}`;
    const response = await t.app.inject({
      method: 'POST',
      url: '/control/dispatch-next',
      headers: { ...t.auth, 'content-type': 'application/json' },
      payload,
    });
    expect(response.statusCode).toBe(422);
    expect(response.json().detail).toEqual([{ loc: ['body', ...Array(depth).fill(0)], msg: expect.any(String), type: 'nul_character' }]);
  });
});
