import type { FastifyInstance } from 'fastify';
import { z } from 'zod';

export type LocRoot = 'body' | 'query' | 'path' | 'header';

export interface ValidationProblem {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/** A 422 with one entry per problem, `loc` rooted at body, query or path (decisions §1). */
export class RequestValidationError extends Error {
  readonly statusCode = 422;
  constructor(readonly problems: ValidationProblem[]) {
    super('request validation failed');
    this.name = 'RequestValidationError';
  }
}

const LOC_ROOTS: Record<string, LocRoot> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

export function problemsFromZod(error: z.ZodError, root: LocRoot): ValidationProblem[] {
  return error.issues.flatMap((issue): ValidationProblem[] => {
    const path = issue.path.map((part) => (typeof part === 'symbol' ? String(part) : part));
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ loc: [root, ...path, key], msg: 'unknown field', type: 'unrecognized_keys' }));
    }
    return [{ loc: [root, ...path], msg: issue.message, type: issue.code }];
  });
}

export function parseOrThrow<T extends z.ZodType>(schema: T, data: unknown, root: LocRoot): z.output<T> {
  const result = schema.safeParse(data);
  if (!result.success) throw new RequestValidationError(problemsFromZod(result.error, root));
  return result.data;
}

/** Route schemas (body, querystring, params) are zod schemas; parsed values replace the raw ones. */
export function useZodValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const zodSchema = schema as unknown as z.ZodType;
    const root = LOC_ROOTS[httpPart ?? 'body'] ?? 'body';
    return (data: unknown) => {
      const result = zodSchema.safeParse(data ?? undefined);
      if (result.success) return { value: result.data };
      return { error: new RequestValidationError(problemsFromZod(result.error, root)) };
    };
  });
}

const emptyToUndefined = (value: unknown) => (value === '' ? undefined : value);

/** An integer query parameter: digits only, within bounds, with a default when absent or empty. */
export function queryInt(options: { min: number; max?: number; default: number }) {
  let bounded = z.number().int().min(options.min);
  if (options.max !== undefined) bounded = bounded.max(options.max);
  const digits = z.string().regex(/^-?\d{1,15}$/, 'must be an integer').transform(Number).pipe(bounded);
  return z
    .preprocess(emptyToUndefined, digits.optional())
    .transform((value) => value ?? options.default);
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

/** The paginated list body of decisions §3. */
export function pageOf<T>(items: T[], total: number, query: { page: number; page_size: number }) {
  return { items, page: query.page, page_size: query.page_size, total, has_more: query.page * query.page_size < total };
}
