import type { FastifyInstance } from 'fastify';
import { hasZodFastifySchemaValidationErrors, serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';

export type LocRoot = 'body' | 'query' | 'path' | 'header';

export interface ValidationProblem {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/** One `{loc, msg, type}` entry of a 422 body (README "HTTP conventions"); loose, so an answer keeps every key. */
export const ValidationProblemSchema = z.looseObject({
  loc: z.array(z.union([z.string(), z.number()])),
  msg: z.string(),
  type: z.string(),
});

const LOC_ROOTS: Record<string, LocRoot> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

/** The provider reports a zod issue's path as a JSON pointer; array indices come back as numbers. */
const pathFromPointer = (pointer: string): (string | number)[] =>
  pointer === '/' ? [] : pointer.slice(1).split('/').map((part) => (/^\d+$/.test(part) ? Number(part) : part));

/**
 * The 422 entries of a request that failed its route schema, `loc` rooted at body, query, path or header, one entry
 * per unknown key.
 */
export function problemsFromValidation(error: unknown): ValidationProblem[] | undefined {
  if (error instanceof InvalidRequest) return error.problems;
  if (!hasZodFastifySchemaValidationErrors(error)) return undefined;
  const root = LOC_ROOTS[(error as { validationContext?: string }).validationContext ?? 'body'] ?? 'body';
  return error.validation.flatMap((issue): ValidationProblem[] => {
    const path = pathFromPointer(issue.instancePath);
    if (issue.keyword === 'unrecognized_keys') {
      const keys = (issue.params as { keys: string[] }).keys;
      return keys.map((key) => ({ loc: [root, ...path, key], msg: 'unknown field', type: 'unrecognized_keys' }));
    }
    return [{ loc: [root, ...path], msg: issue.message ?? 'invalid', type: issue.keyword }];
  });
}

/** A request refused before its route schema ran, answered as a schema failure is (422, one entry per problem). */
export class InvalidRequest extends Error {
  readonly problems: ValidationProblem[];

  constructor(problems: ValidationProblem[]) {
    super(problems.map((problem) => `${problem.loc.join('.')}: ${problem.msg}`).join('; '));
    this.problems = problems;
    this.name = 'InvalidRequest';
  }
}

const NUL = '\u0000';
/** A UTF-16 surrogate without its pair (JSON may escape one, `"\ud800"`): no UTF-8 text, so Postgres refuses it too. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why Postgres could not store this text, or null. */
export function unstorable(text: string): { msg: string; type: string } | null {
  if (text.includes(NUL)) return { msg: 'must not contain the NUL character (U+0000)', type: 'nul_character' };
  if (LONE_SURROGATE.test(text)) return { msg: 'must not contain an unpaired UTF-16 surrogate (not valid Unicode text)', type: 'unpaired_surrogate' };
  return null;
}
/** Bounds the answer to a body full of unstorable text, or holding one very deep down: at most this many entries and loc parts. */
const MAX_TEXT_PROBLEMS = 20;
const MAX_TEXT_LOC_PARTS = 1000;

/** A place in a request value, linked to its parent so that no path is built unless a problem is found there. */
interface Place {
  value: unknown;
  key: string | number;
  parent: Place | undefined;
}

const locOf = (place: Place): (string | number)[] => {
  const loc: (string | number)[] = [];
  for (let at: Place | undefined = place; at; at = at.parent) loc.push(at.key);
  return loc.reverse();
};

/**
 * Where the request values hold text Postgres cannot store (the NUL character, an unpaired surrogate), in a string at
 * any depth or in an object key, as `loc` paths under their roots. Walks with its own stack: a parsed JSON body may nest deeper than the call stack goes.
 */
function unstorableLocations(roots: [LocRoot, unknown][]): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  let locParts = 0;
  const report = (place: Place, problem: { msg: string; type: string }) => {
    const loc = locOf(place);
    locParts += loc.length;
    problems.push({ loc, ...problem });
  };
  const pending: Place[] = roots.map(([root, value]) => ({ value, key: root, parent: undefined })).reverse();
  while (pending.length > 0 && problems.length < MAX_TEXT_PROBLEMS && locParts < MAX_TEXT_LOC_PARTS) {
    const place = pending.pop()!;
    const current = place.value;
    if (typeof current === 'string') {
      const problem = unstorable(current);
      if (problem) report(place, problem);
    } else if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index -= 1) pending.push({ value: current[index], key: index, parent: place });
    } else if (typeof current === 'object' && current !== null) {
      const keys = Object.keys(current);
      for (let index = keys.length - 1; index >= 0; index -= 1) {
        const key = keys[index]!;
        const child: Place = { value: (current as Record<string, unknown>)[key], key, parent: place };
        const problem = unstorable(key);
        if (problem) report(child, { ...problem, msg: `field name ${problem.msg}` });
        else pending.push(child);
      }
    }
  }
  return problems.slice(0, MAX_TEXT_PROBLEMS);
}

/**
 * Refuses the NUL character and unpaired surrogates in every text a request carries (query, path parameters, JSON
 * body: strings at any depth and object keys) with 422, on every route, before its schema runs: Postgres cannot
 * store either in text or jsonb, and no input of this service has a use for them (README "HTTP conventions").
 */
export function refuseUnstorableText(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    const problems = unstorableLocations([
      ['path', request.params],
      ['query', request.query],
      ['body', request.body],
    ]);
    if (problems.length > 0) throw new InvalidRequest(problems);
  });
}

/**
 * Route schemas are zod schemas: handlers get the parsed values, typed from the schemas, and answers are checked
 * against their response schemas.
 */
export function useZodTypeProvider(app: FastifyInstance): void {
  // Fastify hands a missing body over as null; a body schema's default then applies, as for an absent body.
  app.setValidatorCompiler<z.core.$ZodType>((route) => {
    const validate = validatorCompiler(route);
    return (data: unknown) => validate(data ?? undefined);
  });
  app.setSerializerCompiler(serializerCompiler);
}

const emptyToUndefined = (value: unknown) => (value === '' ? undefined : value);

/** An integer query parameter: digits only, within bounds, with a default when absent or empty. */
export function queryInt(options: { min: number; max?: number; default: number }) {
  let bounded = z.number().int().min(options.min);
  if (options.max !== undefined) bounded = bounded.max(options.max);
  const digits = z.string().regex(/^-?\d{1,15}$/, 'must be an integer').transform(Number).pipe(bounded);
  const range = options.max === undefined ? `at least ${options.min}` : `${options.min}–${options.max}`;
  return z
    .preprocess(emptyToUndefined, digits.optional())
    .transform((value) => value ?? options.default)
    .meta({ description: `An integer, ${range}; ${options.default} when absent` });
}

/** A free-text query filter; empty means no filter. */
export function queryText(maxLength = 200) {
  return z.preprocess(emptyToUndefined, z.string().max(maxLength).optional());
}

export function queryBool(defaultValue: boolean) {
  return z
    .preprocess(emptyToUndefined, z.enum(['true', 'false', '1', '0']).optional())
    .transform((value) => (value === undefined ? defaultValue : value === 'true' || value === '1'));
}

/** An optional query parameter checked by `schema`; empty means absent. */
export function queryOptional<T extends z.ZodType>(schema: T) {
  return z.preprocess(emptyToUndefined, schema.optional());
}

/** The paginated list body (README "HTTP conventions"). */
export function pageOf<T>(items: T[], total: number, query: { page: number; page_size: number }) {
  return { items, page: query.page, page_size: query.page_size, total, has_more: query.page * query.page_size < total };
}

/** The text with what Postgres cannot store (NUL, unpaired surrogates) replaced by U+FFFD, for text from outside. */
export const storableText = (text: string): string => text.replaceAll(NUL, '\uFFFD').replace(new RegExp(LONE_SURROGATE.source, 'g'), '\uFFFD');

/** The first string (value or key) at any depth of a JSON value that Postgres could not store, or null. */
export function firstUnstorable(value: unknown): string | null {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const current = pending.pop();
    if (typeof current === 'string') {
      if (unstorable(current)) return current;
    } else if (Array.isArray(current)) {
      pending.push(...current);
    } else if (typeof current === 'object' && current !== null) {
      for (const [key, child] of Object.entries(current)) {
        if (unstorable(key)) return key;
        pending.push(child);
      }
    }
  }
  return null;
}
