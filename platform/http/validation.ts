import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, validatorCompiler } from 'fastify-type-provider-zod';
import { requestHook } from './hooks.ts';
import { answerSerializerCompiler, type AnswerSerializerOptions } from './serialization.ts';
import { z } from 'zod';

export type LocRoot = 'body' | 'query' | 'path' | 'header';

export interface ValidationProblem {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/** One `{loc, msg, type}` entry of a 422 body (docs/http.md#http-conventions); loose, so an answer keeps every key. */
export const ValidationProblemSchema = z
  .object({
    loc: z.array(z.union([z.string(), z.number()])).describe('Where: the part of the request (path, query, body) and the field names and indexes under it'),
    msg: z.string(),
    type: z.string(),
  })
  .meta({ id: 'ValidationProblem', description: 'One problem with a request' });

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
 * Bounds every 422 answer: a body of thousands of unknown keys is answered with as many entries as a body of a few,
 * so that its answer (and the memory to build it) stays small whatever the request holds.
 */
export const MAX_VALIDATION_PROBLEMS = 20;
/** An unknown key is echoed in `loc` up to this many characters: a 1 MiB key name must not come back whole. */
const MAX_ECHOED_KEY_CHARS = 200;

const echoedKey = (key: string): string => (key.length > MAX_ECHOED_KEY_CHARS ? `${key.slice(0, MAX_ECHOED_KEY_CHARS)}…` : key);

/** Collects at most MAX_VALIDATION_PROBLEMS entries and counts the rest, which become one summary entry. */
class ProblemList {
  private readonly listed: ValidationProblem[] = [];
  private omitted = 0;

  add(problem: () => ValidationProblem): void {
    if (this.listed.length < MAX_VALIDATION_PROBLEMS) this.listed.push(problem());
    else this.omitted += 1;
  }

  addCount(count: number): void {
    this.omitted += count;
  }

  entries(root: LocRoot | undefined): ValidationProblem[] {
    if (this.omitted === 0) return this.listed;
    const more = { loc: root ? [root] : [], msg: `${this.omitted} more problems not listed`, type: 'too_many_problems' };
    return [...this.listed, more];
  }
}

/** `problems` as a 422 answers them: the first MAX_VALIDATION_PROBLEMS, then one entry counting the rest. */
export function boundedProblems(problems: readonly ValidationProblem[]): ValidationProblem[] {
  const list = new ProblemList();
  for (const problem of problems) list.add(() => problem);
  return list.entries(problems[0]?.loc[0] === undefined ? undefined : (problems[0].loc[0] as LocRoot));
}

/**
 * The 422 entries of a request that failed its route schema, `loc` rooted at body, query, path or header, one entry
 * per unknown key, at most MAX_VALIDATION_PROBLEMS of them and then one summary entry.
 */
export function problemsFromValidation(error: unknown): ValidationProblem[] | undefined {
  if (error instanceof InvalidRequest) return error.problems;
  if (!hasZodFastifySchemaValidationErrors(error)) return undefined;
  const root = LOC_ROOTS[(error as { validationContext?: string }).validationContext ?? 'body'] ?? 'body';
  const list = new ProblemList();
  for (const issue of error.validation) {
    const path = pathFromPointer(issue.instancePath);
    if (issue.keyword === 'unrecognized_keys') {
      const keys = (issue.params as { keys: string[] }).keys;
      const shown = Math.min(keys.length, MAX_VALIDATION_PROBLEMS);
      for (let index = 0; index < shown; index += 1) {
        list.add(() => ({ loc: [root, ...path, echoedKey(keys[index]!)], msg: 'unknown field', type: 'unrecognized_keys' }));
      }
      list.addCount(keys.length - shown);
    } else {
      list.add(() => ({ loc: [root, ...path], msg: issue.message ?? 'invalid', type: issue.keyword }));
    }
  }
  return list.entries(root);
}

/** A request refused before its route schema ran, answered as a schema failure is (422, bounded as those are). */
export class InvalidRequest extends Error {
  readonly problems: ValidationProblem[];

  constructor(problems: ValidationProblem[]) {
    const bounded = boundedProblems(problems);
    super(bounded.map((problem) => `${problem.loc.join('.')}: ${problem.msg}`).join('; '));
    this.problems = bounded;
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

/** Any character that may make text unstorable; a surrogate may still be paired, which the full walk tells. */
const MAYBE_UNSTORABLE = /[\u0000\uD800-\uDFFF]/;

/**
 * True for nothing, or a flat object of strings (a query, path parameters) in which no key or value holds a character
 * of MAYBE_UNSTORABLE: the common request, answered without the walk's allocations. Anything else gets the walk.
 */
function plainlyStorable(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value !== 'object' || Array.isArray(value)) return false;
  for (const key in value) {
    const text = (value as Record<string, unknown>)[key];
    if (typeof text !== 'string' || MAYBE_UNSTORABLE.test(key) || MAYBE_UNSTORABLE.test(text)) return false;
  }
  return true;
}

/**
 * Refuses the NUL character and unpaired surrogates in every text a request carries (query, path parameters, JSON
 * body: strings at any depth and object keys) with 422, on every route, before its schema runs: Postgres cannot
 * store either in text or jsonb, and no input of this service has a use for them (docs/http.md#http-conventions).
 */
export function refuseUnstorableText(app: FastifyInstance): void {
  app.addHook(
    'preValidation',
    requestHook((request) => {
      if (plainlyStorable(request.query) && plainlyStorable(request.params) && plainlyStorable(request.body)) return;
      const problems = unstorableLocations([
        ['path', request.params],
        ['query', request.query],
        ['body', request.body],
      ]);
      if (problems.length > 0) throw new InvalidRequest(problems);
    }),
  );
}

const BODYLESS_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

const refuseBody = requestHook((request) => {
  if (request.body !== undefined && request.body !== null) {
    throw new InvalidRequest([{ loc: ['body'], msg: 'this route takes no body', type: 'body_not_allowed' }]);
  }
});

const refuseQuery = requestHook((request) => {
  const names = Object.keys((request.query ?? {}) as object);
  if (names.length > 0) {
    throw new InvalidRequest(names.map((name) => ({ loc: ['query', echoedKey(name)], msg: 'unknown field', type: 'unrecognized_keys' })));
  }
});

/**
 * A route that describes no body takes none, and one that describes no query parameters takes none: either is refused
 * with 422 rather than ignored, so a client that believes it passed something learns it did not, as an unknown field
 * of a body or a query is (docs/http.md#http-conventions). Register before the routes.
 */
export function refuseUndescribedInput(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const added = [];
    if (route.schema?.querystring === undefined) added.push(refuseQuery);
    const methods = [route.method].flat();
    if (route.schema?.body === undefined && !methods.every((method) => BODYLESS_METHODS.has(method))) added.push(refuseBody);
    if (added.length > 0) route.preValidation = [...added, ...[route.preValidation ?? []].flat()];
  });
}

/**
 * Route schemas are zod schemas: handlers get the parsed values, typed from the schemas, and answers are written by
 * serializers compiled from their response schemas (checked against them too where `checkAnswers` is on).
 */
export function useZodTypeProvider(app: FastifyInstance, answers: AnswerSerializerOptions): void {
  // Fastify hands a missing body over as null; a body schema's default then applies, as for an absent body.
  app.setValidatorCompiler<z.core.$ZodType>((route) => {
    const validate = validatorCompiler(route);
    return (data: unknown) => validate(data ?? undefined);
  });
  app.setSerializerCompiler(answerSerializerCompiler(answers));
  if (answers.checkAnswers) app.addHook('onSend', refuseUndocumentedStatus);
}

/** Where answers are checked, a status the route's schema does not list fails the answer (500) as drift does. */
function refuseUndocumentedStatus(request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (error: Error | null, payload?: unknown) => void): void {
  const documented = request.routeOptions.schema?.response as Record<string, unknown> | undefined;
  const status = String(reply.statusCode);
  // Requests no route matched (404, and the errors raised while routing) have no route to document them.
  if (!request.routeOptions.url || !documented || status in documented || `${status[0]}XX` in documented || 'default' in documented) {
    done(null, payload);
    return;
  }
  const message = `${request.method} ${request.routeOptions.url}: answered ${status}, which its schema does not list`;
  process.stderr.write(`answer check: ${message}\n`);
  done(new Error(message));
}

const emptyToUndefined = (value: unknown) => (value === '' ? undefined : value);
const INTEGER_TEXT = /^-?\d{1,15}$/;

/** An integer query parameter: digits only, within bounds, with a default when absent or empty. */
export function queryInt(options: { min: number; max?: number; default: number }) {
  let bounded = z.number().int().min(options.min);
  if (options.max !== undefined) bounded = bounded.max(options.max);
  // A refinement, not a pattern: the document shows the parameter as the integer it is, not as a digit string.
  const digits = z.string().refine((text) => INTEGER_TEXT.test(text), 'must be an integer').transform(Number).pipe(bounded);
  const range = options.max === undefined ? `at least ${options.min}` : `${options.min}–${options.max}`;
  return z
    .preprocess(emptyToUndefined, digits.optional())
    .transform((value) => value ?? options.default)
    .meta({
      description: `An integer, ${range}; ${options.default} when absent`,
      type: 'integer',
      minimum: options.min,
      ...(options.max === undefined ? {} : { maximum: options.max }),
      default: options.default,
    });
}

/** A sort query parameter: one of `columns`, ascending, or descending with a leading "-". */
export function querySort<const C extends string>(columns: readonly C[]) {
  const orders = [...columns, ...columns.map((column) => `-${column}` as const)] as [C | `-${C}`, ...(C | `-${C}`)[]];
  return z.enum(orders, { error: `must be one of ${columns.join(', ')}, optionally prefixed with "-"` });
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

/** The paginated list body (docs/http.md#http-conventions). */
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
