import { isDeepStrictEqual } from 'node:util';
import fastJson from 'fast-json-stringify';
import { ResponseSerializationError } from 'fastify-type-provider-zod';
import { z } from 'zod';

type JsonSchema = Record<string, unknown>;

const NULL_BRANCH = (branch: JsonSchema) => branch.type === 'null' && Object.keys(branch).length === 1;

/**
 * zod writes `T | null` as `anyOf: [T, {type: 'null'}]`, which fast-json-stringify can only serialize by validating
 * each branch at run time; `type: [T, 'null']` says the same and compiles to a null check. Kept as it is where T is
 * itself a choice (several types, an enum, a constant).
 */
function nullableAsTypeList(schema: JsonSchema): JsonSchema {
  const { anyOf: branches, ...rest } = schema;
  if (!Array.isArray(branches) || branches.length !== 2) return schema;
  const value = (branches as JsonSchema[]).find((branch) => !NULL_BRANCH(branch));
  if (!value || !(branches as JsonSchema[]).some(NULL_BRANCH)) return schema;
  if (typeof value.type !== 'string' || 'enum' in value || 'const' in value) return schema;
  return { ...rest, ...value, type: [value.type, 'null'] };
}

/** Applies `nullableAsTypeList` at every level of a schema, innermost first. */
function simplify(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(simplify);
  if (node === null || typeof node !== 'object') return node;
  const out: JsonSchema = {};
  for (const [key, child] of Object.entries(node)) {
    const holdsNamedSchemas = key === 'properties' || key === 'definitions' || key === '$defs';
    out[key] = holdsNamedSchemas
      ? Object.fromEntries(Object.entries(child as JsonSchema).map(([name, sub]) => [name, simplify(sub)]))
      : simplify(child);
  }
  return nullableAsTypeList(out);
}

// Routes share answer schemas (every error answer, every row of one kind): each is converted once.
const jsonSchemas = new WeakMap<z.ZodType, JsonSchema>();

/** The JSON Schema a serializer is compiled from: the route's own zod schema, as the OpenAPI document shows it. */
export function answerJsonSchema(schema: z.ZodType): JsonSchema {
  let converted = jsonSchemas.get(schema);
  if (!converted) {
    const json = z.toJSONSchema(schema, { target: 'draft-7', io: 'output', unrepresentable: 'any' }) as JsonSchema;
    delete json.$schema;
    converted = simplify(json) as JsonSchema;
    jsonSchemas.set(schema, converted);
  }
  return converted;
}

/**
 * Whether some object in the schema lets fields it does not name through (an open object, a record). fast-json-stringify
 * writes such fields one by one, generically: for answers made mostly of them it is several times slower than
 * JSON.stringify, while for a schema that names every field it is faster.
 */
function hasOpenObject(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(hasOpenObject);
  if (node === null || typeof node !== 'object') return false;
  const schema = node as JsonSchema;
  const describesObject = schema.type === 'object' || (Array.isArray(schema.type) && schema.type.includes('object')) || 'properties' in schema;
  if (describesObject && schema.additionalProperties !== false) return true;
  return Object.values(schema).some(hasOpenObject);
}

const MAX_DRIFT_PATHS = 10;

/**
 * Where an answer holds what its schema does not describe: the JSON path of every field the exact serializer left
 * out (`$.items[0].title`), and of every value it wrote differently. `written` is what the serializer wrote, `sent`
 * what JSON.stringify writes, both parsed.
 */
export function driftPaths(written: unknown, sent: unknown, path = '$', found: string[] = []): string[] {
  if (found.length >= MAX_DRIFT_PATHS) return found;
  if (Array.isArray(sent) && Array.isArray(written) && sent.length === written.length) {
    sent.forEach((item, index) => driftPaths(written[index], item, `${path}[${index}]`, found));
  } else if (isPlainObject(sent) && isPlainObject(written)) {
    for (const [key, value] of Object.entries(sent)) {
      const at = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
      if (!(key in written)) {
        if (found.length < MAX_DRIFT_PATHS) found.push(`${at} (not in the schema)`);
      } else {
        driftPaths(written[key], value, at, found);
      }
    }
  } else if (!isDeepStrictEqual(written, sent)) {
    found.push(`${path} (written as ${JSON.stringify(written)?.slice(0, 40)})`);
  }
  return found;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

export interface AnswerSerializerOptions {
  /**
   * Check every answer before it is sent, and fail it (500) when it does not hold: it must parse with its zod schema,
   * and fast-json-stringify, writing exactly what the document describes, must write the same JSON as JSON.stringify
   * (so an answer carries no field a closed schema leaves out). The tests run with this on, so an answer that drifts
   * from the document fails the suite; in service nothing is checked. On, every serializer is also compiled at
   * start-up, so a schema fast-json-stringify cannot compile fails the server's start in the tests, not a request.
   */
  checkAnswers: boolean;
}

type Serialize = (data: unknown) => string;

/**
 * How answers are written (docs/http.md#http-conventions, answers). A schema that names every field is written by the
 * serializer fast-json-stringify compiles from it (Fastify's own serialization path), on the route's first answer; one
 * with open objects by JSON.stringify, which writes the same thing (the tests check that it does) faster. Either way,
 * nothing is parsed or checked on the way out in service.
 */
export function answerSerializerCompiler(options: AnswerSerializerOptions) {
  // Routes share answer shapes (every error answer, every page of one kind): one compiled serializer serves each shape.
  const compiled = new Map<string, Serialize>();
  const compile = (jsonSchema: JsonSchema): Serialize => {
    const key = JSON.stringify(jsonSchema);
    let serialize = compiled.get(key);
    if (!serialize) {
      serialize = fastJson(jsonSchema as unknown as Parameters<typeof fastJson>[0]) as Serialize;
      compiled.set(key, serialize);
    }
    return serialize;
  };
  return ({ schema, method, url, httpStatus }: { schema: unknown; method: string; url: string; httpStatus?: string }): Serialize => {
    const zodSchema = schema as z.ZodType;
    if (!options.checkAnswers) {
      let serialize: Serialize | undefined;
      return (data) => {
        if (!serialize) {
          const jsonSchema = answerJsonSchema(zodSchema);
          serialize = hasOpenObject(jsonSchema) ? JSON.stringify : compile(jsonSchema);
        }
        return serialize(data);
      };
    }
    const exact = compile(answerJsonSchema(zodSchema));
    return (data) => {
      const checked = zodSchema.safeParse(data);
      if (!checked.success) throw new ResponseSerializationError(method, url, { cause: checked.error });
      const written = exact(data);
      const paths = driftPaths(JSON.parse(written), JSON.parse(JSON.stringify(data)));
      if (paths.length > 0) {
        const message = `${method} ${url} ${httpStatus ?? ''}: the answer holds what its schema does not describe: ${paths.join(', ')}`;
        // The client gets the generic 500; the test run shows which route and which paths.
        process.stderr.write(`answer check: ${message}\n`);
        throw new ResponseSerializationError(method, url, { cause: new z.ZodError([{ code: 'custom', path: [], input: data, message }]) });
      }
      return written;
    };
  };
}
