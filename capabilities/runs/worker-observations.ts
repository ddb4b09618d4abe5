import type { PreflightCheck } from './domain/preflight-checks.ts';
import type { Queryable } from '../../platform/store/store.ts';

/** Cached worker preflight results (docs/worker-gate.md#worker-gate). */

export interface WorkerObservationInsert {
  target: string;
  wake_gate_url: string;
  ok: boolean;
  summary: string;
  checks: PreflightCheck[];
  /** The run whose dispatch ran this preflight. */
  run_id?: string | null;
}

export interface WorkerObservation extends Required<WorkerObservationInsert> {
  observation_id: number;
  observed_at: string;
}

const COLUMNS = 'observation_id, target, wake_gate_url, ok, summary, checks, run_id, observed_at';

export async function insertWorkerObservation(q: Queryable, observation: WorkerObservationInsert): Promise<WorkerObservation> {
  const result = await q.query<WorkerObservation>(
    `INSERT INTO worker_observations (target, wake_gate_url, ok, summary, checks, run_id)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6) RETURNING ${COLUMNS}`,
    [observation.target, observation.wake_gate_url, observation.ok, observation.summary, JSON.stringify(observation.checks), observation.run_id ?? null],
  );
  return result.rows[0]!;
}

/** The newest observation of each target, by target name. */
export async function latestWorkerObservations(q: Queryable): Promise<WorkerObservation[]> {
  const result = await q.query<WorkerObservation>(
    `SELECT DISTINCT ON (target) ${COLUMNS} FROM worker_observations ORDER BY target, observation_id DESC`,
  );
  return result.rows;
}

/** Newest first: observations taken for the given runs or of the given targets. */
export async function listWorkerObservations(
  q: Queryable,
  filter: { runIds?: readonly string[]; targets?: readonly string[] },
  limit: number,
): Promise<WorkerObservation[]> {
  const result = await q.query<WorkerObservation>(
    `SELECT ${COLUMNS} FROM worker_observations
      WHERE run_id = ANY($1::text[]) OR target = ANY($2::text[])
      ORDER BY observation_id DESC LIMIT $3`,
    [filter.runIds ?? [], filter.targets ?? [], limit],
  );
  return result.rows;
}
