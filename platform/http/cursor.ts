import { hash } from 'node:crypto';

/**
 * The opaque `cursor` of the v1 lists (docs/console.md#read-models): the sort a walk uses and the sort key of the last row it
 * returned, base64url JSON, with a check value so that an edited or truncated cursor is refused (422) rather than
 * read as some other place in the list. It is not a secret and grants nothing: every row it leads to is readable.
 */

export interface CursorPosition {
  /** The name of the sort the cursor was issued for. */
  sort: string;
  key: string[];
}

const CHECK_LENGTH = 16;
const check = (payload: string) => hash('sha256', `rcp-cursor-v1\0${payload}`, 'base64url').slice(0, CHECK_LENGTH);

export function encodeCursor(position: CursorPosition): string {
  const payload = Buffer.from(JSON.stringify({ s: position.sort, k: position.key })).toString('base64url');
  return `${payload}.${check(payload)}`;
}

/** The position a cursor names, or undefined when it is not one this service issued. */
export function decodeCursor(text: string): CursorPosition | undefined {
  const [payload, given, ...rest] = text.split('.');
  if (!payload || !given || rest.length > 0 || given !== check(payload)) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { s?: unknown; k?: unknown };
    if (typeof parsed.s !== 'string' || !Array.isArray(parsed.k) || !parsed.k.every((part) => typeof part === 'string')) return undefined;
    return { sort: parsed.s, key: parsed.k as string[] };
  } catch {
    return undefined;
  }
}
