import type { Queryable } from '../../../platform/store/store.ts';

/**
 * Lane leases (docs/runs.md#runs, parallel callers): a live dispatch-next call leases the lane of its candidate before it
 * starts the run workflow and gives the lease back once the workflow has answered, so parallel callers spread across
 * idle lanes instead of all starting runs for the same top candidate, of which only one can claim it. The claim
 * itself (capabilities/runs/run-ledger.ts) stays the only arbiter of which run holds a lane; a lease only keeps callers apart. It is
 * held in the database, not in memory, so several control-plane processes share it. It is short and renewed while its
 * call waits, so it lapses within seconds of the death of the process holding it.
 */

/** Lanes under a lease that has not lapsed. */
export async function leasedLanes(q: Queryable): Promise<Set<string>> {
  const result = await q.query<{ lane: string }>('SELECT lane FROM dispatch_lane_leases WHERE expires_at > clock_timestamp()');
  return new Set(result.rows.map((row) => row.lane));
}

/** Takes the lane for `holder` (one dispatch call) unless another holds an unlapsed lease on it; true when taken. */
export async function takeLaneLease(q: Queryable, lane: string, holder: string, ttlMs: number): Promise<boolean> {
  const result = await q.query(
    `INSERT INTO dispatch_lane_leases (lane, holder, expires_at)
     VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3::double precision / 1000))
     ON CONFLICT (lane) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
       WHERE dispatch_lane_leases.expires_at <= clock_timestamp()
     RETURNING lane`,
    [lane, holder, ttlMs],
  );
  return result.rows.length > 0;
}

/** Extends `holder`'s lease by `ttlMs` from now; false when it no longer holds the lane (its lease lapsed and was taken). */
export async function renewLaneLease(q: Queryable, lane: string, holder: string, ttlMs: number): Promise<boolean> {
  const result = await q.query(
    `UPDATE dispatch_lane_leases SET expires_at = clock_timestamp() + make_interval(secs => $3::double precision / 1000)
     WHERE lane = $1 AND holder = $2 RETURNING lane`,
    [lane, holder, ttlMs],
  );
  return result.rows.length > 0;
}

/** Gives the lane back, if `holder` still holds it. */
export async function releaseLaneLease(q: Queryable, lane: string, holder: string): Promise<void> {
  await q.query('DELETE FROM dispatch_lane_leases WHERE lane = $1 AND holder = $2', [lane, holder]);
}
