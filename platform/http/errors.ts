import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SECURITY_HEADERS } from './security-headers.ts';
import { boundedProblems, problemsFromValidation, type ValidationProblem } from './validation.ts';

export const BODY_LIMIT_BYTES = 1024 * 1024;

/** An error whose status and `detail` are meant for the client. */
export class HttpError extends Error {
  readonly statusCode: number;
  readonly detail: string | Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(statusCode: number, detail: string | Record<string, unknown>, headers: Record<string, string> = {}) {
    super(typeof detail === 'string' ? detail : `HTTP ${statusCode}`);
    this.statusCode = statusCode;
    this.detail = detail;
    this.headers = headers;
    this.name = 'HttpError';
  }
}

export const unauthorized = () =>
  new HttpError(401, 'invalid bearer token', { 'www-authenticate': 'Bearer' });

/** What a layer above maps its own refusals to (a service's refused command, a store's idempotency conflict). */
export interface ClientAnswer {
  status: number;
  detail: unknown;
}

/** Answers an error the caller can act on, or undefined for one this mapper does not know. */
export type ErrorMapper = (error: Error) => ClientAnswer | undefined;

const JSON_PARSE_CODES = new Set(['FST_ERR_CTP_INVALID_JSON_BODY', 'FST_ERR_CTP_EMPTY_JSON_BODY']);

/**
 * Maps every failure to `{"detail": ...}` (see docs/http.md#http-conventions); unexpected errors never leak details. `mapError` answers the errors of the layers this module must not import; any failure of a request for which
 * `unauthenticated` is true is answered 401, whatever it was, so that nothing about the body reaches a caller who has
 * not shown it may send it.
 */
export function registerErrorHandling(
  app: FastifyInstance,
  mapError: ErrorMapper = () => undefined,
  unauthenticated: (request: FastifyRequest) => boolean = () => false,
): void {
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ detail: 'Not Found' }));

  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (unauthenticated(request)) {
      // The caller learns nothing, but a failure of the service itself is still logged for its operator.
      if (!(error instanceof HttpError) && (error.statusCode ?? 500) >= 500) request.log.error({ err: error }, 'unhandled error');
      const refusal = unauthorized();
      return reply.code(refusal.statusCode).headers(refusal.headers).send({ detail: refusal.detail });
    }
    if (error instanceof HttpError) {
      return reply.code(error.statusCode).headers(error.headers).send({ detail: error.detail });
    }
    const problems = problemsFromValidation(error);
    if (problems) return reply.code(422).send({ detail: problems });
    const mapped = mapError(error);
    if (mapped) return reply.code(mapped.status).send({ detail: boundedDetail(mapped) });
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.code(413).send({ detail: `request body exceeds ${BODY_LIMIT_BYTES} bytes` });
    }
    if (JSON_PARSE_CODES.has(error.code) || (error instanceof SyntaxError && error.statusCode === 400)) {
      return reply.code(422).send({ detail: [{ loc: ['body'], msg: `invalid JSON: ${error.message}`, type: 'json_invalid' }] });
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      return reply.code(status).send({ detail: error.message });
    }
    request.log.error({ err: error }, 'unhandled error');
    return reply.code(500).send({ detail: 'internal error', request_id: request.id });
  });
}

/** A refused command's list of problems is bounded as a schema failure's is. */
const boundedDetail = (answer: ClientAnswer): unknown =>
  answer.status === 422 && Array.isArray(answer.detail) ? boundedProblems(answer.detail as ValidationProblem[]) : answer.detail;

/** What the client is told for errors Fastify raises while routing; never the URL itself. */
const ROUTING_ERROR_DETAIL: Readonly<Record<string, string>> = {
  FST_ERR_BAD_URL: 'the request URL is not valid percent-encoding',
  FST_ERR_MAX_PARAM_LENGTH: 'a path parameter is too long',
};

/**
 * Fastify's `frameworkErrors`: a URL it cannot decode, or a path parameter over the router's limit, fails before any
 * hook runs. It gets the answer every other error gets: `{"detail": ...}`, `X-Request-Id` and the security headers.
 * Authentication comes before routing, so a request that carries no credential at all is answered 401, as it would be
 * for any other path.
 */
export function answerRoutingError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.headers({ 'x-request-id': request.id, ...SECURITY_HEADERS });
  if (!request.headers.authorization && !request.headers.cookie) {
    void reply.code(401).headers(unauthorized().headers).send({ detail: 'invalid bearer token' });
    return;
  }
  const status = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 400;
  void reply.code(status).send({ detail: ROUTING_ERROR_DETAIL[error.code] ?? 'the request could not be routed' });
}
