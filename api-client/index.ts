import createClient, { type Client, type Middleware } from 'openapi-fetch';
import type { paths } from './schema.ts';

/**
 * The typed client of the control API, exported as `research-control-plane/client`: the types are generated from the
 * served OpenAPI document (schema.ts), the calls are openapi-fetch's, and this wrapper adds what every caller needs:
 * the bearer token, an `X-Request-Id` on each request, errors thrown in one shape, idempotency keys for commands, and
 * cursor paging as an async iterator.
 */

export type { paths, operations, components } from './schema.ts';

export interface ControlClientOptions {
  /** The control plane's base URL, e.g. http://127.0.0.1:8080. */
  baseUrl: string;
  /** control_api_bearer_token. Sent only in the Authorization header. */
  token: string;
  /** Each request's X-Request-Id; default a new UUID per request. */
  requestId?: () => string;
  /** The fetch to use; default the global one. */
  fetch?: typeof fetch;
}

/** The `detail` of an error answer: a message, the fields a request got wrong, or a refused command's message. */
export type ErrorDetail = string | { loc: (string | number)[]; msg: string; type: string }[] | ({ message: string } & Record<string, unknown>);

/** An answer outside 2xx, in the shape every route gives one: its status, its detail and the request's id. */
export class ControlApiError extends Error {
  override readonly name = 'ControlApiError';

  readonly status: number;
  readonly detail: ErrorDetail;
  /** The id the server logged the request under (the X-Request-Id sent, or the one it made). */
  readonly requestId: string | null;

  constructor(status: number, detail: ErrorDetail, requestId: string | null) {
    super(`${status}: ${describeDetail(detail)}${requestId ? ` (request ${requestId})` : ''}`);
    this.status = status;
    this.detail = detail;
    this.requestId = requestId;
  }
}

function describeDetail(detail: ErrorDetail): string {
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) return detail.map((problem) => `${problem.loc.join('.')}: ${problem.msg}`).join('; ');
  return detail.message;
}

/** The list routes read by cursor: `{ items, page: { next_cursor, has_more } }`. */
export type CursorPath = {
  [P in keyof paths]: paths[P] extends { get: { parameters: { query?: { cursor?: string } } } } ? P : never;
}[keyof paths];

type ListAnswer<P extends CursorPath> = paths[P]['get'] extends { responses: { 200: { content: { 'application/json': infer A } } } } ? A : never;
/** One row of a cursor list. */
export type ItemOf<P extends CursorPath> = ListAnswer<P> extends { items: (infer I)[] } ? I : never;
/** A cursor list's filters and sort (its cursor is the iterator's). */
export type ListQuery<P extends CursorPath> = Omit<NonNullable<paths[P]['get']['parameters']['query']>, 'cursor'>;

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

export interface ControlClient {
  /** The typed openapi-fetch client: `api.GET('/control/api/v1/runs/{run_id}', { params: { path: { run_id } } })`. */
  api: Client<paths>;
  /** An openapi-fetch call's body; throws ControlApiError for any answer outside 2xx. */
  data<T>(call: Promise<Answer<T>>): Promise<T>;
  /** Every row of a cursor list, page after page, as long as the caller reads. */
  each<P extends CursorPath>(path: P, query?: ListQuery<P>): AsyncGenerator<ItemOf<P>>;
  /** A new idempotency key for a command: pass the same key again to retry that command safely. */
  idempotencyKey(): string;
}

export function createControlClient(options: ControlClientOptions): ControlClient {
  const requestId = options.requestId ?? (() => crypto.randomUUID());
  const api = createClient<paths>({ baseUrl: options.baseUrl.replace(/\/+$/, ''), ...(options.fetch ? { fetch: options.fetch } : {}) });
  const identify: Middleware = {
    onRequest({ request }) {
      request.headers.set('authorization', `Bearer ${options.token}`);
      if (!request.headers.has('x-request-id')) request.headers.set('x-request-id', requestId());
      return request;
    },
  };
  api.use(identify);

  const data = async <T>(call: Promise<Answer<T>>): Promise<T> => {
    const { data: body, error, response } = await call;
    if (response.ok) return body as T;
    const detail = (error as { detail?: ErrorDetail } | undefined)?.detail ?? (typeof error === 'string' && error ? error : response.statusText);
    const id = (error as { request_id?: string } | undefined)?.request_id ?? response.headers.get('x-request-id');
    throw new ControlApiError(response.status, detail, id);
  };

  async function* each<P extends CursorPath>(path: P, query?: ListQuery<P>): AsyncGenerator<ItemOf<P>> {
    let cursor: string | undefined;
    do {
      // One generic call for every list route: the path's own types are checked at the caller, by CursorPath and ListQuery.
      const get = api.GET as unknown as (path: string, init: { params: { query: Record<string, unknown> } }) => Promise<Answer<ListAnswer<P>>>;
      const page = (await data(get(path, { params: { query: { ...query, ...(cursor ? { cursor } : {}) } } }))) as {
        items: ItemOf<P>[];
        page: { next_cursor: string | null; has_more: boolean };
      };
      yield* page.items;
      cursor = page.page.has_more && page.page.next_cursor ? page.page.next_cursor : undefined;
    } while (cursor);
  }

  return { api, data, each, idempotencyKey: () => crypto.randomUUID() };
}
