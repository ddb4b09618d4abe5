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
