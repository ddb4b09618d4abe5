import type { FastifyInstance, RouteOptions } from 'fastify';
import { errorResponses, type ErrorStatus } from '../platform/http/responses.ts';
import { SAFE_METHODS } from './auth.ts';

/**
 * The error answers a route can give whatever it does (docs/http.md#http-conventions):
 * - any request: 400 (a URL that is not valid percent-encoding), 408 and 431 (a request Node could not read), 421 (a
 *   host outside allowed_hosts), 422 (text Postgres cannot store, an unknown query parameter, a body where none is
 *   taken) and 500;
 * - a route that takes credentials: 401, and 429 once a client has sent too many wrong ones;
 * - a write that a dashboard session may make: 403 without its CSRF token;
 * - any write: 413 and 415 for a body too large or not JSON, which is read before the route can refuse a body at all;
 * - a route with path parameters: 404 for an id it does not know, 414 for one longer than the router takes.
 */
export function globalAnswerStatuses(route: Pick<RouteOptions, 'method' | 'url' | 'schema' | 'config'>): ErrorStatus[] {
  const statuses: ErrorStatus[] = [400, 408, 421, 422, 431, 500];
  const auth = route.config?.auth;
  if (auth !== 'public') statuses.push(401, 429);
  const methods = [route.method].flat();
  const write = methods.some((method) => !SAFE_METHODS.has(method));
  if (write && (auth === undefined || auth === 'control')) statuses.push(403);
  if (write) statuses.push(413, 415);
  if (route.url.includes('/:')) statuses.push(404, 414);
  return statuses;
}

/**
 * Adds the global answers to every route's response schemas that does not describe them itself, so the OpenAPI
 * document lists them on each operation and the answer check in the tests holds them to the error shape. Register it
 * before the routes.
 */
export function documentGlobalAnswers(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const schema = (route.schema ??= {});
    const own = (schema.response ?? {}) as Record<string, unknown>;
    schema.response = { ...errorResponses(...globalAnswerStatuses(route)), ...own };
  });
}
