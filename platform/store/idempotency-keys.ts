import { payloadHash } from '../http/payload-hash.ts';
import type { Queryable } from './store.ts';

export class IdempotencyConflictError extends Error {
  readonly key: string;

  constructor(key: string) {
    super(`idempotency key '${key}' was reused with different payload`);
    this.key = key;
    this.name = 'IdempotencyConflictError';
  }
}

export interface IdempotentResult<T> {
  response: T;
  /** True when this call replayed a stored response instead of running the command. */
  replayed: boolean;
}

/**
 * Runs `command` at most once per (scope, key), inside the caller's transaction. The same key with the same payload
 * returns the first response; a different payload throws IdempotencyConflictError. A concurrent first call holds the
 * key's row lock, so a racing duplicate waits for it to commit and then replays its response.
 */
export async function runIdempotent<T>(
  tx: Queryable,
  request: { scope: string; key: string; payload: unknown },
  command: () => Promise<T>,
): Promise<IdempotentResult<T>> {
  const hash = payloadHash(request.payload);
  const claimed = await tx.query(
    `INSERT INTO idempotency_keys (scope, key, payload_hash) VALUES ($1, $2, $3)
     ON CONFLICT (scope, key) DO NOTHING RETURNING key`,
    [request.scope, request.key, hash],
  );
  if (claimed.rowCount === 0) {
    const stored = await tx.query<{ payload_hash: string; response: T }>(
      'SELECT payload_hash, response FROM idempotency_keys WHERE scope = $1 AND key = $2',
      [request.scope, request.key],
    );
    const row = stored.rows[0]!;
    if (row.payload_hash !== hash) throw new IdempotencyConflictError(request.key);
    return { response: row.response, replayed: true };
  }
  const response = await command();
  await tx.query(
    `UPDATE idempotency_keys SET response = $3::jsonb, completed_at = clock_timestamp() WHERE scope = $1 AND key = $2`,
    [request.scope, request.key, JSON.stringify(response ?? null)],
  );
  return { response, replayed: false };
}

/**
 * The answer a call with this (scope, key) completed successfully, for a command that checks the paper's state before
 * it claims its key: a replay must get the first answer even when that state has moved on since (the first call moved
 * it). Null when the key is unused, or holds no success (a refusal is decided again); a different payload throws
 * IdempotencyConflictError.
 */
export async function storedResponse<T>(q: Queryable, request: { scope: string; key: string; payload: unknown }): Promise<T | null> {
  const stored = await q.query<{ payload_hash: string; response: T }>(
    'SELECT payload_hash, response FROM idempotency_keys WHERE scope = $1 AND key = $2 AND completed_at IS NOT NULL AND coalesce(status_code, 200) = 200',
    [request.scope, request.key],
  );
  const row = stored.rows[0];
  if (!row) return null;
  if (row.payload_hash !== payloadHash(request.payload)) throw new IdempotencyConflictError(request.key);
  return row.response;
}

/**
 * A long command's key: claimed before the command runs, completed (or released) once it has an answer. P is what the
 * first call noted while pending; R is the answer it completed the key with, as status 200. A key completed with another
 * status holds the refusal's `{detail}` instead (see `replayAnswer` in platform/command-errors.ts).
 */
export type KeyClaim<P, R = unknown> =
  | { state: 'claimed' }
  | { state: 'pending'; pending: P | null; pending_for_ms: number }
  | { state: 'done'; response: R; status_code: number };

/**
 * Claims (scope, key) for a command too long to hold a transaction open over (a workflow the request waits on). The
 * same key with the same payload finds the claim: done with its answer, or pending with what the first call noted
 * to find its work again (`notePending`); a different payload throws IdempotencyConflictError.
 */
export async function claimKey<P, R = unknown>(q: Queryable, request: { scope: string; key: string; payload: unknown }): Promise<KeyClaim<P, R>> {
  const hash = payloadHash(request.payload);
  const claimed = await q.query(
    `INSERT INTO idempotency_keys (scope, key, payload_hash) VALUES ($1, $2, $3) ON CONFLICT (scope, key) DO NOTHING RETURNING key`,
    [request.scope, request.key, hash],
  );
  if (claimed.rowCount > 0) return { state: 'claimed' };
  const stored = await q.query<{ payload_hash: string; response: unknown; status_code: number | null; completed_at: string | null; pending_for_ms: number }>(
    `SELECT payload_hash, response, status_code, completed_at, extract(epoch FROM clock_timestamp() - created_at) * 1000 AS pending_for_ms
       FROM idempotency_keys WHERE scope = $1 AND key = $2`,
    [request.scope, request.key],
  );
  const row = stored.rows[0];
  if (!row) return claimKey<P, R>(q, request);
  if (row.payload_hash !== hash) throw new IdempotencyConflictError(request.key);
  if (row.completed_at === null) return { state: 'pending', pending: (row.response as { pending?: P } | null)?.pending ?? null, pending_for_ms: Number(row.pending_for_ms) };
  // The answer this scope's own caller stored, read back in the shape it wrote.
  return { state: 'done', response: row.response as R, status_code: row.status_code ?? 200 };
}

export async function notePending(q: Queryable, scope: string, key: string, pending: unknown): Promise<void> {
  await q.query('UPDATE idempotency_keys SET response = $3::jsonb WHERE scope = $1 AND key = $2 AND completed_at IS NULL', [scope, key, JSON.stringify({ pending })]);
}

export async function completeKey(q: Queryable, scope: string, key: string, answer: { response: unknown; status_code: number }): Promise<void> {
  await q.query(
    'UPDATE idempotency_keys SET response = $3::jsonb, status_code = $4, completed_at = clock_timestamp() WHERE scope = $1 AND key = $2',
    [scope, key, JSON.stringify(answer.response ?? null), answer.status_code],
  );
}

/** Gives a claimed key up: the command was refused, so the same key may be sent again once it would succeed. */
export async function releaseKey(q: Queryable, scope: string, key: string): Promise<void> {
  await q.query('DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2', [scope, key]);
}

/**
 * Gives up a claim that noted nothing within `olderThanMs` (its caller died before it got that far), so the next call
 * with the key can claim it; a claim that has noted its work or completed since is kept.
 */
export async function releaseAbandonedClaim(q: Queryable, scope: string, key: string, olderThanMs: number): Promise<void> {
  await q.query(
    `DELETE FROM idempotency_keys
      WHERE scope = $1 AND key = $2 AND completed_at IS NULL AND (response IS NULL OR response->'pending' IS NULL)
        AND created_at < clock_timestamp() - $3 * interval '1 millisecond'`,
    [scope, key, olderThanMs],
  );
}
