import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { useZodTypeProvider } from '../../platform/http/validation.ts';

/**
 * How answers are written (docs/http.md#http-conventions, answers): a schema that names every field by the serializer
 * fast-json-stringify compiles from it, one with open objects by JSON.stringify; the answer check (on in every test app
 * and in the processes the tests start) parses each answer with its zod schema and makes sure both writers agree.
 */

const Row = z.object({ id: z.number().int(), name: z.string(), note: z.string().nullable(), tags: z.array(z.string()) });
const ClosedAnswer = z.object({ items: z.array(Row), total: z.number().int() });
const OpenAnswer = z.looseObject({ items: z.array(Row), total: z.number().int(), nested: z.looseObject({ at: z.string() }).nullable() });

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function answer(schema: z.ZodType, checkAnswers: boolean, body: unknown) {
  app = Fastify({ logger: false });
  useZodTypeProvider(app, { checkAnswers });
  app.withTypeProvider<ZodTypeProvider>().get('/answer', { schema: { response: { 200: schema } } }, async () => body as never);
  await app.ready();
  const response = await app.inject({ method: 'GET', url: '/answer' });
  await app.close();
  app = undefined;
  return { status: response.statusCode, type: response.headers['content-type'], body: response.body };
}

const rows = [
  { id: 1, name: 'quote " and \\ backslash', note: null, tags: ['a', 'é', '\u2028'] },
  { id: 2, name: 'two', note: 'n', tags: [] },
];
const closed = { items: rows, total: 2 };
const open = { ...closed, nested: { at: '2025-01-01T00:00:00.000Z', extra: { kept: [1, 'x', null] } }, passed_through: { deep: true } };

describe('answer serialization', () => {
  it.each([
    ['closed', ClosedAnswer, closed],
    ['open', OpenAnswer, open],
  ] as const)('writes a valid answer of a %s schema as JSON, the same with and without the check', async (_kind, schema, body) => {
    for (const checkAnswers of [true, false]) {
      const written = await answer(schema, checkAnswers, body);
      expect(written.status).toBe(200);
      expect(written.type).toMatch(/^application\/json/);
      expect(JSON.parse(written.body)).toEqual(body);
    }
  });

  it('never writes a field that a closed schema leaves out', async () => {
    const written = await answer(ClosedAnswer, false, { ...closed, items: [{ ...rows[0], secret_column: 'not in the document' }], secret_total: 3 });
    expect(JSON.parse(written.body)).toEqual({ items: [rows[0]], total: 2 });
  });

  it('fails with 500, when answers are checked, an answer that does not parse with its schema', async () => {
    const drifted = { ...open, items: [{ ...rows[0], name: 5 }] };
    expect((await answer(OpenAnswer, true, drifted)).status).toBe(500);
    // Unchecked, the answer goes out as it is: the suite, which runs with the check, is the guard.
    expect(JSON.parse((await answer(OpenAnswer, false, drifted)).body).items[0].name).toBe(5);
  });

  it('fails with 500, when answers are checked, a field the schema leaves out even where the open parts would let it through', async () => {
    // zod strips the extra field of a closed row, so the answer parses; the two writers disagree on it.
    const leaking = { ...open, items: [{ ...rows[0], secret_column: 'not in the document' }] };
    expect(Row.safeParse(leaking.items[0]).success).toBe(true);
    expect((await answer(OpenAnswer, true, leaking)).status).toBe(500);
  });

  it('names the route, the status and the JSON path of every field the schema leaves out', async () => {
    const written: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string) => written.push(String(chunk)) > 0) as typeof process.stderr.write;
    try {
      const leaking = { items: [rows[0], { ...rows[1], rank_reasons: ['x'], 'odd key': 1 }], total: 2, page: { next: null } };
      expect((await answer(ClosedAnswer, true, leaking)).status).toBe(500);
    } finally {
      process.stderr.write = write;
    }
    expect(written.join('')).toContain(
      'answer check: GET /answer 200: the answer holds what its schema does not describe: $.items[1].rank_reasons (not in the schema), $.items[1]["odd key"] (not in the schema), $.page (not in the schema)',
    );
  });

  it('fails with 500, when answers are checked, a status the route does not document', async () => {
    app = Fastify({ logger: false });
    useZodTypeProvider(app, { checkAnswers: true });
    // Untyped, so the handler may answer a status its schema does not list.
    app.get('/answer', { schema: { response: { 200: ClosedAnswer, 500: z.object({ detail: z.string() }) } } }, async (_request, reply: FastifyReply) => reply.code(202).send(closed));
    await app.ready();
    expect((await app.inject({ method: 'GET', url: '/answer' })).statusCode).toBe(500);
  });
});
