import type { Queryable } from '../store/store.ts';

/** Dashboard sessions are stored by the SHA-256 of the cookie value; the cookie itself is never stored. */
export interface SessionRecord {
  id_hash: string;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
}

export async function insertSession(
  tx: Queryable,
  session: { idHash: string; expiresAt: Date },
): Promise<void> {
  await tx.query('INSERT INTO sessions (id_hash, expires_at) VALUES ($1, $2)', [
    session.idHash,
    session.expiresAt.toISOString(),
  ]);
}

/** The session, if it exists and is neither past its absolute expiry nor idle for longer than `idleMs`. */
export async function findLiveSession(db: Queryable, idHash: string, idleMs: number): Promise<SessionRecord | undefined> {
  const result = await db.query<SessionRecord>(
    `SELECT id_hash, created_at, last_seen_at, expires_at FROM sessions
     WHERE id_hash = $1 AND expires_at > clock_timestamp()
       AND last_seen_at > clock_timestamp() - ($2::double precision * interval '1 millisecond')`,
    [idHash, idleMs],
  );
  return result.rows[0];
}

export async function touchSession(db: Queryable, idHash: string): Promise<void> {
  await db.query('UPDATE sessions SET last_seen_at = clock_timestamp() WHERE id_hash = $1', [idHash]);
}

export async function deleteSession(tx: Queryable, idHash: string): Promise<boolean> {
  const result = await tx.query('DELETE FROM sessions WHERE id_hash = $1', [idHash]);
  return result.rowCount > 0;
}

export async function deleteExpiredSessions(db: Queryable, idleMs: number): Promise<number> {
  const result = await db.query(
    `DELETE FROM sessions WHERE expires_at <= clock_timestamp()
       OR last_seen_at <= clock_timestamp() - ($1::double precision * interval '1 millisecond')`,
    [idleMs],
  );
  return result.rowCount;
}
