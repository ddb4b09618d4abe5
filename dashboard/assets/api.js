// @ts-check
/**
 * Calls to the control API from a signed-in dashboard. The session is the HttpOnly `cp_session` cookie the browser
 * sends by itself; this module holds only the session's CSRF token, in memory, and sends it on every write. The
 * control API token is never kept: sign-in exchanges it for the session and forgets it.
 */

/** The actor the dashboard names in commands (`requested_by`, `paused_by`, …). */
export const ACTOR = 'dashboard';

/** @type {string | null} */
let csrfToken = null;
/** @type {Set<() => void>} */
const signedOutListeners = new Set();

export class ApiError extends Error {
  /**
   * @param {number} status 0 when the control plane did not answer at all
   * @param {unknown} detail the answer's `detail`
   * @param {any} [body] the whole answer
   */
  constructor(status, detail, body) {
    super(describeDetail(detail).join('; '));
    this.status = status;
    this.detail = detail;
    this.body = body;
  }
}

/**
 * An error answer's `detail` as lines a person can read: a message, one line per validation problem (`body.count:
 * must be at most 5`), or the message of a refused command with its details.
 * @param {unknown} detail
 * @returns {string[]}
 */
export function describeDetail(detail) {
  if (typeof detail === 'string') return [detail];
  if (Array.isArray(detail)) {
    return detail.map((problem) => {
      const where = Array.isArray(problem?.loc) ? problem.loc.join('.') : '';
      return where ? `${where}: ${problem?.msg ?? 'invalid'}` : String(problem?.msg ?? 'invalid');
    });
  }
  if (detail && typeof detail === 'object') {
    const { message, ...rest } = /** @type {Record<string, unknown>} */ (detail);
    const lines = typeof message === 'string' ? [message] : [];
    for (const [key, value] of Object.entries(rest)) lines.push(`${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
    return lines.length > 0 ? lines : ['the request failed'];
  }
  return ['the request failed'];
}

/** Runs `listener` whenever the session turns out to be gone (an answer 401). @param {() => void} listener */
export function onSignedOut(listener) {
  signedOutListeners.add(listener);
}

/** @param {string | null} token */
function setCsrfToken(token) {
  csrfToken = token;
}

/**
 * One JSON call. Resolves with the answer's body; rejects with an ApiError carrying the API's `detail`.
 * @param {'GET' | 'POST' | 'DELETE'} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {{ acceptStatus?: number[] }} [options] error statuses whose body is still the answer (a degraded health check)
 * @returns {Promise<any>}
 */
export async function api(method, path, body, options = {}) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-csrf-token'] = csrfToken;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    throw new ApiError(0, `the control plane did not answer (${error instanceof Error ? error.message : 'network error'})`);
  }
  const data = await response.json().catch(() => null);
  if (response.ok || options.acceptStatus?.includes(response.status)) return data;
  if (response.status === 401 && path !== SESSION_PATH) {
    setCsrfToken(null);
    for (const listener of signedOutListeners) listener();
  }
  throw new ApiError(response.status, data?.detail ?? `HTTP ${response.status}`, data);
}

/**
 * A path with its query: empty, null and undefined values are left out.
 * @param {string} path
 * @param {Record<string, string | number | boolean | null | undefined>} params
 */
export function withQuery(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === '') continue;
    query.set(key, String(value));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/** A path segment from an id that may hold `:` or `/` (paper ids do). @param {string} id */
export const segment = (id) => encodeURIComponent(id);

const SESSION_PATH = '/control/api/session';

/** Ends this browser's legacy state: storage and any cookie a script can see (the session cookie is HttpOnly). */
function clearBrowserState() {
  try {
    localStorage.clear();
  } catch {
    // Storage may be disabled; then there is nothing to clear.
  }
  try {
    sessionStorage.clear();
  } catch {
    // As above.
  }
  for (const cookie of document.cookie.split(';')) {
    const name = cookie.split('=')[0]?.trim();
    if (name) document.cookie = `${name}=; Max-Age=0; path=/`;
  }
}

/** Exchanges the control API token for a session; the token is not kept. @param {string} token */
export async function signIn(token) {
  clearBrowserState();
  const answer = await api('POST', SESSION_PATH, { token });
  setCsrfToken(answer.csrf_token);
}

/** Picks up the session this browser already has (after a reload); false when there is none. */
export async function resumeSession() {
  try {
    const answer = await api('GET', SESSION_PATH);
    setCsrfToken(answer.csrf_token);
    return true;
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 404)) return false;
    throw error;
  }
}

/** Ends the session; the CSRF token is forgotten once the server has ended it (or says it had already ended). */
export async function signOut() {
  try {
    await api('DELETE', SESSION_PATH);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) setCsrfToken(null);
    throw error;
  }
  setCsrfToken(null);
}

/** A fresh idempotency key for one command the person means to run once. */
export const newKey = () => `dashboard-${crypto.randomUUID()}`;
