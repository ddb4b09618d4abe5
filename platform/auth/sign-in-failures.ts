import type { Queryable } from '../store/store.ts';

/**
 * Wrong sign-ins per client in fixed windows, shared by every control-plane replica through the database
 * (docs/security.md#security-model). Only failures are counted, so a correct sign-in never reads or spends the budget.
 */

export interface SpentFailure {
  /** The client had already spent its budget in this window: the failure is answered 429 and not counted again. */
  refused: boolean;
  /** Until the window ends. */
  retryAfterSec: number;
}

/**
 * Counts one failure of `client`, starting a new window when its last one has ended; other clients' ended windows are
 * dropped. `q` is the store itself, not a transaction: the two statements must commit apart.
 */
export async function spendSignInFailure(q: Queryable, client: string, limits: { maxFailures: number; windowMs: number }): Promise<SpentFailure> {
  // One statement, one transaction: now() is the same instant throughout. Past maxFailures + 1 the count stops
  // growing: one above the budget already says "refused".
  const result = await q.query<{ failures: number; seconds_left: number }>(
    `INSERT INTO sign_in_failures AS w (client_key, window_started_at, failures) VALUES ($1, now(), 1)
     ON CONFLICT (client_key) DO UPDATE SET
       window_started_at = CASE WHEN w.window_started_at <= now() - make_interval(secs => $2::double precision / 1000)
                                THEN now() ELSE w.window_started_at END,
       failures = CASE WHEN w.window_started_at <= now() - make_interval(secs => $2::double precision / 1000)
                       THEN 1 ELSE LEAST(w.failures + 1, $3::integer + 1) END
     RETURNING failures,
       EXTRACT(EPOCH FROM (window_started_at + make_interval(secs => $2::double precision / 1000) - now()))::float8 AS seconds_left`,
    [client, limits.windowMs, limits.maxFailures],
  );
  // Ended windows of other clients, in a statement of its own: holding no lock on this client's row meanwhile, two
  // clients failing at once cannot wait on each other.
  await q.query(
    `DELETE FROM sign_in_failures WHERE client_key <> $1 AND window_started_at <= now() - make_interval(secs => $2::double precision / 1000)`,
    [client, limits.windowMs],
  );
  const row = result.rows[0]!;
  return { refused: row.failures > limits.maxFailures, retryAfterSec: Math.max(1, Math.ceil(Number(row.seconds_left))) };
}
