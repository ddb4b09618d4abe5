import { z } from 'zod';
import { ValidationProblemSchema } from './validation.ts';

/**
 * An answer object that names the fields clients rely on and passes any others through unchanged, so a response
 * schema never turns a valid answer into a 500. Typed as the named fields alone, so a handler may return a value of
 * a wider interface.
 */
export const openObject = <const T extends z.core.$ZodLooseShape>(shape: T) => z.looseObject(shape) as unknown as z.ZodObject<T>;

/** Any JSON object: for nested parts of an answer that the document leaves open. */
export const anyObject = () => z.looseObject({}) as unknown as z.ZodType<object>;

/**
 * Every error answer: `{"detail": ...}`, a message, one `{loc, msg, type}` entry per problem (422), or an object with
 * a `message` and ids (a refused command); a 500 adds its `request_id` (README "HTTP conventions").
 */
export const ErrorBodySchema = openObject({
  detail: z.union([z.string(), z.array(ValidationProblemSchema), anyObject()]),
  request_id: z.string().optional(),
});

type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 422 | 424 | 429 | 501 | 502 | 503 | 504;

const ERROR_DESCRIPTIONS: Record<ErrorStatus, string> = {
  400: 'The request cannot be carried out as asked',
  401: 'Missing or invalid credentials (WWW-Authenticate: Bearer)',
  403: 'Not allowed: a missing or invalid CSRF token on a dashboard session, or a mode the configuration does not allow',
  404: 'Unknown resource',
  409: 'Conflicting state, or an idempotency key reused with a different payload',
  422: 'Request failed validation: one {loc, msg, type} entry per problem',
  424: 'The evidence a paper needs is missing (detail.evidence_sync says what was tried and what is missing)',
  429: 'Too many requests from this client address; Retry-After says when to try again',
  501: 'Not available in this configuration (feature switched off, or a read-only store)',
  502: 'A worker gate, agent, hosted paper writer or research provider failed',
  503: 'Not ready',
  504: 'A worker gate, research provider or workflow did not answer in time',
};

/** Response schemas for the error answers a route gives, each described for the OpenAPI document. */
export function errorResponses<const S extends ErrorStatus>(...statuses: S[]): Record<S, typeof ErrorBodySchema> {
  return Object.fromEntries(
    statuses.map((status) => [status, ErrorBodySchema.describe(ERROR_DESCRIPTIONS[status])]),
  ) as Record<S, typeof ErrorBodySchema>;
}

/** A page of `items` (README "HTTP conventions"). */
export const pageBody = <T extends z.ZodType>(item: T) =>
  openObject({
    items: z.array(item),
    page: z.number().int(),
    page_size: z.number().int(),
    total: z.number().int(),
    has_more: z.boolean(),
  });
