/**
 * Credentials never travel in a URL (docs/http.md#http-conventions): URLs end up in logs, proxies and browser history. A
 * query parameter whose name looks like a credential is refused on every route that takes credentials, and its value
 * never reaches a log line, whatever route it was sent to.
 *
 * A name is compared after percent-decoding (repeatedly, so `tok%2565n` counts too), with `+` and every character
 * other than a letter or digit removed, case-insensitively: `Token`, `tok%65n`, `access-token` and `API_KEY` all count.
 */

/** Normalized names that are credentials by themselves. */
export const CREDENTIAL_QUERY_NAMES: readonly string[] = ['key', 'auth', 'authorization', 'bearer', 'credential', 'credentials'];

/** Normalized endings that make a name a credential: `access_token`, `api_key`, `x-api-key`, `client_secret`, `cp_session`. */
export const CREDENTIAL_QUERY_SUFFIXES: readonly string[] = ['token', 'apikey', 'secret', 'password', 'passwd', 'session'];

const MAX_DECODE_ROUNDS = 4;

/** Percent-decodes byte by byte, which never throws on malformed input; the names compared are ASCII. */
function decodeName(name: string): string {
  if (!name.includes('%')) return name;
  let current = name;
  for (let round = 0; round < MAX_DECODE_ROUNDS; round += 1) {
    const next = current.replace(/%([0-9a-f]{2})/gi, (_match, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
    if (next === current) break;
    current = next;
  }
  return current;
}

const normalizeName = (name: string) => decodeName(name).toLowerCase().replace(/[^a-z0-9]/g, '');

/**
 * Every request's URL is checked twice (authentication, the log line) and clients send the same few names, so the
 * verdicts on short names are kept; the cache is emptied when full, so a client sending endless new names cannot grow it.
 */
const verdicts = new Map<string, boolean>();
const MAX_VERDICTS = 1_000;
const MAX_KEPT_NAME_LENGTH = 64;

/** Whether a raw (still encoded) query parameter name looks like a credential. */
export function isCredentialName(rawName: string): boolean {
  const known = verdicts.get(rawName);
  if (known !== undefined) return known;
  const name = normalizeName(rawName);
  const verdict = CREDENTIAL_QUERY_NAMES.includes(name) || CREDENTIAL_QUERY_SUFFIXES.some((suffix) => name.endsWith(suffix));
  if (rawName.length <= MAX_KEPT_NAME_LENGTH) {
    if (verdicts.size >= MAX_VERDICTS) verdicts.clear();
    verdicts.set(rawName, verdict);
  }
  return verdict;
}

// `;` separates parameters for some parsers, so it splits here too: a credential after it still counts.
const QUERY_PARAMETER = /(^|[&;])([^&;=]*)(=?)([^&;]*)/g;

const splitUrl = (url: string) => {
  const start = url.indexOf('?');
  return start === -1 ? undefined : { path: url.slice(0, start + 1), query: url.slice(start + 1) };
};

/** Whether the URL's query string names a credential-like parameter (with or without a value). */
export function hasCredentialQuery(url: string): boolean {
  const parts = splitUrl(url);
  if (!parts) return false;
  return parts.query.split(/[&;]/).some((parameter) => isCredentialName(parameter.split('=', 1)[0] ?? ''));
}

export const REDACTED_VALUE = '[Redacted]';

/** The URL with the value of every credential-like query parameter replaced, for logging. */
export function redactCredentialQuery(url: string): string {
  // Every request's log line comes through here; rewriting the query is the rare case.
  if (!hasCredentialQuery(url)) return url;
  const parts = splitUrl(url)!;
  const query = parts.query.replace(QUERY_PARAMETER, (match, separator: string, name: string, equals: string, value: string) =>
    equals && value && isCredentialName(name) ? `${separator}${name}=${REDACTED_VALUE}` : match,
  );
  return parts.path + query;
}
