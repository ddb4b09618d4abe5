import { z } from 'zod';
import { JsonValueSchema, jsonObject } from './json-value.ts';
import { ValidationProblemSchema } from './validation.ts';

/**
 * A part of an answer whose shape another system decides (a foreign gate's telemetry, rows a Core source posts, what
 * an earlier version of this service wrote into an append-only ledger): any JSON object, and `why` says whose shape
 * it is in the document. Every other part of an answer is a closed schema.
 */
export const foreignObject = (why: string) => jsonObject().describe(why);

/**
 * True when a schema's output and a row type accept each other, so the schema names exactly the row's fields with
 * their types. `Assert<Documents<typeof Schema, Row>>` fails to compile when a column is added to the row and not to
 * the schema that documents it (the closed serializer would otherwise drop it without a word).
 */
export type Documents<Schema extends z.ZodType, Row> = [z.output<Schema>] extends [Row] ? ([Row] extends [z.output<Schema>] ? true : false) : false;
export type Assert<T extends true> = T;

/** An object of one integer count per name, every name present. */
export const countsOf = <const K extends string>(names: readonly K[]) =>
  z.object(Object.fromEntries(names.map((name) => [name, z.number().int()])) as Record<K, z.ZodNumber>);

/**
 * Every error answer: `{"detail": ...}`, a message, one `{loc, msg, type}` entry per problem (422), or an object with
 * a `message` and ids (a refused command); a 500 adds its `request_id` (docs/http.md#http-conventions). One schema for
 * every status, named once in the OpenAPI document (`ErrorBody`); each answer's own description says what its status means.
 */
export const ErrorBodySchema = z
  .object({
    detail: z.union([
      z.string(),
      z.array(ValidationProblemSchema),
      z
        .object({ message: z.string() })
        .catchall(JsonValueSchema)
        .describe('A refused command: its message, with the ids and state it concerns, which differ from command to command'),
    ]),
    request_id: z.string().optional().describe('Present on every 500: the request in the server log'),
  })
  .meta({ id: 'ErrorBody', description: 'An error answer (docs/http.md#http-conventions)' });

export type ErrorStatus = 400 | 401 | 403 | 404 | 408 | 409 | 413 | 414 | 415 | 421 | 422 | 424 | 429 | 431 | 500 | 501 | 502 | 503 | 504;

const ERROR_DESCRIPTIONS: Record<ErrorStatus, string> = {
  400: 'The request cannot be carried out as asked',
  401: 'Missing or invalid credentials (WWW-Authenticate: Bearer)',
  403: 'Not allowed: a missing or invalid CSRF token on a dashboard session, or a mode the configuration does not allow',
  404: 'Unknown resource',
  408: 'The request did not arrive whole in time (the connection is closed)',
  409: 'Conflicting state, or an idempotency key reused with a different payload',
  413: 'The request body is larger than 1 MiB',
  414: 'A path parameter is longer than the router takes',
  415: 'The request body is not JSON (Content-Type application/json)',
  421: 'The Host header names a host this server is not configured to answer (allowed_hosts)',
  422: 'Request failed validation: one {loc, msg, type} entry per problem',
  424: 'The evidence a paper needs is missing (detail.evidence_sync says what was tried and what is missing)',
  429: 'Too many requests from this client address; Retry-After says when to try again',
  431: 'The request headers are too large (the connection is closed)',
  500: 'An unexpected failure; request_id names it in the server log',
  501: 'Not available in this configuration (feature switched off, or a read-only store)',
  502: 'A worker gate, agent, hosted paper writer or research provider failed',
  503: 'Not ready',
  504: 'A worker gate, research provider or workflow did not answer in time',
};

/** What an error answer of `status` means, for the OpenAPI document. */
export const errorAnswerDescription = (status: ErrorStatus): string => ERROR_DESCRIPTIONS[status];

/** Response schemas for the error answers a route gives: the one error schema for each (docs/http.md#http-conventions). */
export function errorResponses<const S extends ErrorStatus>(...statuses: S[]): Record<S, typeof ErrorBodySchema> {
  return Object.fromEntries(statuses.map((status) => [status, ErrorBodySchema])) as Record<S, typeof ErrorBodySchema>;
}

/** A page of `items` (docs/http.md#http-conventions). */
export const pageBody = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    page: z.number().int(),
    page_size: z.number().int(),
    total: z.number().int(),
    has_more: z.boolean(),
  });
