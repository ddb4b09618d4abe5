import { Client, Connection } from '@temporalio/client';
import fc from 'fast-check';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { RegisteredRoute } from '../../api/create-server.ts';
import { temporalLaunchers } from '../../bin/temporal-launchers.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { NO_WORKERS, startTestApp, TEST_GATE_TOKEN, TEST_TOKEN, type TestApp } from '../support/app.ts';

// expected duration: ~45 s alone (the suite shares two cores, so it counts: requests per route are sized for that)

/**
 * Every route of Fastify's route table (collected as the server registers them, so a route added later is fuzzed
 * without touching this file) gets REQUESTS_PER_ROUTE generated requests with the credential its auth kind asks for:
 * wrong types, missing and extra fields, huge strings, deep nesting, unicode, numbers at the bounds, bad path
 * parameters, malformed JSON and wrong content types. No answer may be a 5xx, every 4xx must have the error shape of
 * docs/http.md#http-conventions, a refused command must leave the ledgers as they were, and the server must still serve
 * normal requests afterwards. The field names come from the OpenAPI document the server publishes for each route.
 */

const REQUESTS_PER_ROUTE = 250;
const SEED = 20261123;
const CALLBACK_TOKEN = NO_WORKERS.completionCallbackToken;

interface Operation {
  parameters?: { in: string; name: string }[];
  requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> };
}

let t: TestApp;
let connection: Connection;
let operations: Record<string, Record<string, Operation>>;

beforeAll(async () => {
  connection = await Connection.connect({ address: inject('temporalAddress') });
  const client = new Client({ connection });
  const { runs, cycles } = temporalLaunchers(client, { taskQueue: 'route-fuzz', namespace: 'default' });
  // Live dispatch on (with no worker targets a live call finds no candidate), so no route answers its 501 "disabled".
  t = await startTestApp({ runs, cycles, dispatch: { ...NO_WORKERS, liveDispatchEnabled: true } }, { workerGate: true, logLevel: 'warn' });
  const document = await t.app.inject({ method: 'GET', url: '/control/api/openapi.json', headers: t.auth });
  operations = (document.json() as { paths: typeof operations }).paths;
  const tables = await t.store.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`,
  );
  // A refused sign-in is counted against its client's budget (docs/http.md#http-conventions, sign-in rate limit): that
  // row records the refusal itself, not a change a refused request made to the ledgers.
  await countLedgerWrites(t.store, tables.rows.map((row) => row.name).filter((name) => name !== 'sign_in_failures'));
}, 60_000);

afterAll(async () => {
  await t?.close();
  await connection?.close();
});

/**
 * Counts every row any statement inserts, updates or deletes in any table: a trigger on each table of this test's own
 * database, so a refused request that wrote anything shows up without comparing whole tables after every request.
 */
async function countLedgerWrites(db: Queryable, tables: string[]): Promise<void> {
  await db.query(`CREATE TABLE fuzz_ledger_writes (n bigint NOT NULL); INSERT INTO fuzz_ledger_writes VALUES (0);
    CREATE FUNCTION fuzz_count_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN UPDATE fuzz_ledger_writes SET n = n + 1; RETURN NULL; END $$;`);
  for (const table of tables) {
    await db.query(`CREATE TRIGGER fuzz_count_write AFTER INSERT OR UPDATE OR DELETE ON "${table}" FOR EACH ROW EXECUTE FUNCTION fuzz_count_write()`);
  }
}

const ledgerWrites = async (db: Queryable) => Number((await db.query<{ n: string }>('SELECT n FROM fuzz_ledger_writes')).rows[0]!.n);

function credentialFor(route: RegisteredRoute): Record<string, string> {
  switch (route.auth) {
    case 'public':
      return {};
    case 'gate':
      return { authorization: `Bearer ${TEST_GATE_TOKEN}` };
    case 'callback':
      return { authorization: `Bearer ${CALLBACK_TOKEN}` };
    default:
      return { authorization: `Bearer ${TEST_TOKEN}` };
  }
}

// ---- what the requests are made of --------------------------------------------------------------------------------

const nested = (depth: number, leaf: unknown): unknown => {
  let value = leaf;
  for (let level = 0; level < depth; level += 1) value = level % 2 === 0 ? [value] : { a: value };
  return value;
};

/** Long, but within what Node's HTTP parser lets through in a URL (16 KiB of headers) and in a body field. */
const longString = fc.constantFrom(300, 3_000, 12_000).map((length) => 'x'.repeat(length));
/** Just over the 1 MiB body limit: answered 413 before anything parses it. */
const OVERSIZED_BODY = `{"a":"${'x'.repeat(1024 * 1024 + 16)}"}`;
const oddString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', ' ', '\u0000', '../../etc/passwd', '%00', '\uD800', '🧪'.repeat(300), 'null', 'true', '-1', '1e309', '<script>'),
);
const boundaryNumber = fc.oneof(
  fc.constantFrom(0, -0, -1, 1, 0.5, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), 2 ** 53, -(2 ** 53), Number.MAX_VALUE, Number.MIN_VALUE, 1e308, -1e308),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: oddString },
  { weight: 2, arbitrary: boundaryNumber },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.oneof(longString, fc.constant('y'.repeat(70_000))) },
  { weight: 1, arbitrary: fc.integer({ min: 20, max: 3000 }).map((depth) => nested(depth, 1)) },
);

/** An object over the route's own field names (each missing, or of any type) plus, sometimes, fields it does not know. */
const fieldsOf = (names: string[]) =>
  fc
    .tuple(
      fc.record(Object.fromEntries(names.map((name) => [name, anyValue])), { requiredKeys: [] }),
      fc.dictionary(fc.oneof(oddString, fc.constantFrom('__proto__', 'constructor', 'extra')), anyValue, { maxKeys: 3 }),
      fc.boolean(),
    )
    .map(([known, extra, withExtra]) => (withExtra ? { ...known, ...extra } : known));

const MALFORMED_JSON = ['{', '{"a":', 'nul', '[1,2', '{"a":1}}', "{'a':1}", '{"a":1,}', '\u0000', '{"a":"\\ud800"}', 'NaN', '{"a":01}'];

interface Body {
  text: string | undefined;
  contentType: string | undefined;
}

function bodyArbitrary(names: string[]): fc.Arbitrary<Body> {
  const json = fc.oneof(
    { weight: 6, arbitrary: fieldsOf(names) },
    { weight: 2, arbitrary: fc.jsonValue() },
    { weight: 1, arbitrary: fc.integer({ min: 20, max: 3000 }).map((depth) => nested(depth, {})) },
  );
  const text = fc.oneof(
    { weight: 8, arbitrary: json.map((value) => JSON.stringify(value)) },
    { weight: 2, arbitrary: fc.oneof(fc.constantFrom(...MALFORMED_JSON), oddString) },
    { weight: 1, arbitrary: fc.constantFrom(undefined, OVERSIZED_BODY) },
  );
  const contentType = fc.oneof(
    { weight: 8, arbitrary: fc.constant('application/json') },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        undefined,
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/json; charset=utf-16',
        'application/xml',
        'application/json, text/plain',
        '*/*',
      ),
    },
  );
  return fc.record({ text, contentType });
}

/** Lone surrogates replaced, as a client must before it can percent-encode a string. */
const wellFormed = (value: string) => value.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');

const pathValue = fc.oneof(
  { weight: 4, arbitrary: oddString.map((value) => encodeURIComponent(wellFormed(value))) },
  { weight: 1, arbitrary: fc.constantFrom('%zz', '%', '..', '.', '%2e%2e', '%2F', 'a%00b') },
  { weight: 1, arbitrary: fc.constantFrom(1_000, 8_000).map((length) => 'r'.repeat(length)) },
);

function queryArbitrary(names: string[]): fc.Arbitrary<string> {
  const key = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...(names.length > 0 ? names : ['q'])) }, { weight: 1, arbitrary: oddString });
  const value = fc.oneof(oddString, boundaryNumber.map(String), longString);
  return fc.oneof(
    { weight: 6, arbitrary: fc.array(fc.tuple(key, value), { maxLength: 5 }).map((pairs) => new URLSearchParams(pairs).toString()) },
    { weight: 1, arbitrary: fc.constantFrom('%zz=1', 'a=%', '&&&', '=', 'limit=1&limit=2') },
  );
}

function requestArbitrary(route: RegisteredRoute): fc.Arbitrary<InjectOptions & { url: string }> {
  const operation = operations[route.url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[route.method.toLowerCase()];
  const queryNames = (operation?.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
  const bodyNames = Object.keys(operation?.requestBody?.content['application/json']?.schema.properties ?? {});
  const params = [...route.url.matchAll(/:([A-Za-z_]+)/g)].map((match) => match[1]!);
  const hasBody = !['GET', 'HEAD', 'OPTIONS'].includes(route.method);
  return fc
    .record({
      params: fc.tuple(...params.map(() => pathValue), fc.constant('')),
      query: queryArbitrary(queryNames),
      body: hasBody ? bodyArbitrary(bodyNames) : fc.constant<Body>({ text: undefined, contentType: undefined }),
    })
    .map(({ params: values, query, body }) => {
      let index = 0;
      const path = route.url.replace(/:([A-Za-z_]+)/g, () => values[index++] as string);
      return {
        method: route.method as InjectOptions['method'],
        url: query ? `${path}?${query}` : path,
        headers: { ...credentialFor(route), ...(body.contentType ? { 'content-type': body.contentType } : {}) },
        ...(body.text !== undefined ? { payload: body.text } : {}),
      };
    });
}

// ---- what every answer must be ------------------------------------------------------------------------------------

function problemsWith(response: LightMyRequestResponse): string[] {
  const problems: string[] = [];
  if (response.statusCode >= 500) problems.push(`answered ${response.statusCode}`);
  if (!response.headers['x-request-id']) problems.push('no X-Request-Id');
  if (response.statusCode < 400) return problems;
  let body: unknown;
  try {
    body = response.json();
  } catch {
    return [...problems, `${response.statusCode} with a body that is not JSON: ${response.body.slice(0, 120)}`];
  }
  const detail = (body as { detail?: unknown } | null)?.detail;
  if (typeof detail !== 'string' && (typeof detail !== 'object' || detail === null)) {
    problems.push(`${response.statusCode} without a detail: ${response.body.slice(0, 120)}`);
  }
  if (response.statusCode === 422) {
    const entries = Array.isArray(detail) ? (detail as { loc?: unknown; msg?: unknown; type?: unknown }[]) : [];
    if (entries.length === 0) problems.push(`422 whose detail is not a list of problems: ${response.body.slice(0, 120)}`);
    for (const entry of entries) {
      const where = Array.isArray(entry.loc) ? entry.loc[0] : undefined;
      if (!['body', 'query', 'path'].includes(String(where)) || typeof entry.msg !== 'string' || typeof entry.type !== 'string') {
        problems.push(`422 entry not in the loc/msg/type shape: ${JSON.stringify(entry).slice(0, 160)}`);
      }
    }
  }
  return problems;
}

const describeRequest = (request: InjectOptions & { url: string }) =>
  `${String(request.method)} ${request.url.slice(0, 160)} [${String((request.headers as Record<string, string>)['content-type'] ?? 'no content-type')}] ${String(request.payload ?? '').slice(0, 160)}`;

describe('every route under generated requests', () => {
  // Alone it takes ~45 s; beside three other files on two cores, four to six times that.
  it(`answers ${REQUESTS_PER_ROUTE} generated requests per route without a 5xx, in the error shape, changing nothing when refused`, { timeout: 420_000 }, async () => {
    const routes = t.routes.filter((route) => route.method !== 'HEAD');
    expect(routes.length).toBeGreaterThan(30);
    const failures: string[] = [];
    let sent = 0;
    for (const [index, route] of routes.entries()) {
      const began = Date.now();
      const arbitrary = requestArbitrary(route);
      const writes = route.method !== 'GET';
      let writesSoFar = writes ? await ledgerWrites(t.store) : 0;
      // One at a time, each from its own seed: the requests of a route need not all be in memory at once.
      for (let n = 0; n < REQUESTS_PER_ROUTE; n += 1) {
        const [request] = fc.sample(arbitrary, { numRuns: 1, seed: SEED + index * REQUESTS_PER_ROUTE + n });
        const response = await t.app.inject(request!);
        sent += 1;
        for (const problem of problemsWith(response)) failures.push(`${route.method} ${route.url}: ${problem} <- ${describeRequest(request!)}`);
        if (!writes) continue;
        const after = await ledgerWrites(t.store);
        if (response.statusCode >= 400 && after !== writesSoFar) {
          failures.push(`${route.method} ${route.url}: refused with ${response.statusCode} but changed the ledgers <- ${describeRequest(request!)}`);
        }
        writesSoFar = after;
      }
      if (process.env.FUZZ_TIMINGS) console.log(`${route.method} ${route.url} ${Date.now() - began} ms`);
    }
    expect(sent).toBe(routes.length * REQUESTS_PER_ROUTE);
    // One example of each kind of problem, so a report stays readable however many requests hit it.
    const kinds = new Map<string, string>();
    for (const failure of failures) {
      const kind = failure.slice(0, failure.indexOf(' <- ')).replace(/: \{.*$/, '');
      if (!kinds.has(kind)) kinds.set(kind, failure.slice(0, 600));
    }
    expect([...kinds.values()], `${failures.length} problems`).toEqual([]);

    // Still healthy: the health routes answer, and an ordinary read still works.
    expect((await t.app.inject({ method: 'GET', url: '/control/health', headers: t.auth })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    const events = await t.app.inject({ method: 'GET', url: '/control/api/v1/events?page_size=5', headers: t.auth });
    expect(events.statusCode).toBe(200);
    // And the write count sees an accepted command, so an unchanged count above meant nothing was written.
    const before = await ledgerWrites(t.store);
    const paused = await t.app.inject({ method: 'POST', url: '/control/pause', headers: t.auth, payload: { reason: 'fuzz check', paused_by: 'fuzz' } });
    expect(paused.statusCode, paused.body).toBe(200);
    expect(await ledgerWrites(t.store)).toBeGreaterThan(before);
  });
});
