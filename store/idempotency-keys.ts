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
