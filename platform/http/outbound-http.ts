/**
 * Pieces every client of an outside HTTP service shares (the paper writer, the research provider, the alert
 * receivers): a body read with a size cap, secret redaction, transport-failure names that never quote a URL, and
 * tolerant JSON parsing of model output.
 */

/** The body as text, or null when it is larger than `maxBytes`. */
export async function readCapped(response: Response, maxBytes: number): Promise<string | null> {
  if (Number(response.headers.get('content-length')) > maxBytes) {
    response.body?.cancel().catch(() => {});
    return null;
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks).toString('utf8');
    size += value.byteLength;
    if (size > maxBytes) {
      reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
}

/** Replaces every secret in a text with `[redacted]`; empty secrets are skipped. */
export const redactor =
  (...secrets: readonly string[]) =>
  (text: string): string =>
    secrets.reduce((out, secret) => (secret ? out.split(secret).join('[redacted]') : out), text);

/** A text on one line, shortened to `max` characters, with secrets taken out. */
export function excerpt(text: string, redact: (text: string) => string, max = 200): string {
  const flat = redact(text).replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** Names a transport failure by its code (ECONNREFUSED, ENOTFOUND): the messages underneath may quote the URL. */
export function failureCode(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; name?: unknown } } | null)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.name === 'string') return cause.name;
  return error instanceof Error ? error.name : 'unknown error';
}

/** Header values are visible ASCII; anything else would make fetch throw an error that quotes the value. */
export const VALID_HEADER_VALUE = /^[\x21-\x7e]*$/;

export function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** Some models fence their JSON even when asked for a bare object. */
const FENCED = /^\s*```[A-Za-z]*[ \t]*\r?\n([\s\S]*?)\r?\n[ \t]*```\s*$/;
export const unfenced = (content: string): string => FENCED.exec(content)?.[1] ?? content;

/** `${base_url}/${path}` as a URL, or null when base_url is not an http(s) URL. */
export function endpointOf(baseUrl: string, path: string): URL | null {
  try {
    const url = new URL(`${baseUrl.replace(/\/+$/, '')}/${path}`);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}

/** An http(s) URL as given, or null. */
export function httpUrlOf(text: string): URL | null {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}
