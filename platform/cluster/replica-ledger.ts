import type { Queryable } from '../store/store.ts';

/** A control-plane replica as it last reported itself (store/migrations/0015_control_plane_replicas.sql). */
export interface ReplicaRow {
  replica_id: string;
  config_fingerprint: string;
  config_fields: Record<string, string>;
  started_at: string;
  last_seen_at: string;
}

export interface ReplicaReport {
  replica_id: string;
  config_fingerprint: string;
  config_fields: Record<string, string>;
  /** The names of its worker targets. */
  worker_lanes: string[];
}

/**
 * Records that `replica` runs now with this config (its start time is kept from its first report), and drops the rows
 * of other replicas not heard from within `lostAfterMs` (replicas that died without leaving).
 */
export async function reportReplica(q: Queryable, replica: ReplicaReport, lostAfterMs: number): Promise<void> {
  await q.query(
    `DELETE FROM control_plane_replicas WHERE replica_id <> $1 AND last_seen_at < clock_timestamp() - make_interval(secs => $2::double precision / 1000)`,
    [replica.replica_id, lostAfterMs],
  );
  await q.query(
    `INSERT INTO control_plane_replicas (replica_id, config_fingerprint, config_fields, worker_lanes) VALUES ($1, $2, $3::jsonb, $4::text[])
     ON CONFLICT (replica_id) DO UPDATE SET config_fingerprint = EXCLUDED.config_fingerprint,
       config_fields = EXCLUDED.config_fields, worker_lanes = EXCLUDED.worker_lanes, last_seen_at = clock_timestamp()`,
    [replica.replica_id, replica.config_fingerprint, JSON.stringify(replica.config_fields), replica.worker_lanes],
  );
}

/** Those of `lanes` that some replica heard from within `withinMs` has not configured (a replica that reported no lanes list is not asked). */
export async function lanesMissingOnSomeReplica(q: Queryable, lanes: readonly string[], withinMs: number): Promise<Set<string>> {
  if (lanes.length === 0) return new Set();
  const result = await q.query<{ lane: string }>(
    `SELECT lane FROM unnest($1::text[]) AS lane
     WHERE EXISTS (
       SELECT 1 FROM control_plane_replicas r
       WHERE r.last_seen_at >= clock_timestamp() - make_interval(secs => $2::double precision / 1000)
         AND r.worker_lanes IS NOT NULL AND NOT (lane = ANY (r.worker_lanes)))`,
    [lanes, withinMs],
  );
  return new Set(result.rows.map((row) => row.lane));
}

/** The replicas that reported within `withinMs`, oldest first. */
export async function liveReplicas(q: Queryable, withinMs: number): Promise<ReplicaRow[]> {
  const result = await q.query<ReplicaRow>(
    `SELECT replica_id, config_fingerprint, config_fields, started_at, last_seen_at FROM control_plane_replicas
     WHERE last_seen_at >= clock_timestamp() - make_interval(secs => $1::double precision / 1000)
     ORDER BY started_at, replica_id`,
    [withinMs],
  );
  return result.rows;
}

export async function removeReplica(q: Queryable, replicaId: string): Promise<void> {
  await q.query('DELETE FROM control_plane_replicas WHERE replica_id = $1', [replicaId]);
}
