import type { Queryable } from '../../platform/store/store.ts';

export interface OperatorFlags {
  queue_paused: boolean;
  maintenance_mode: boolean;
}

export type FlagName = keyof OperatorFlags;

/** A fresh store is unpaused with maintenance off; a missing row reads as false. */
export async function readFlags(db: Queryable): Promise<OperatorFlags> {
  const result = await db.query<{ name: string; value: unknown }>('SELECT name, value FROM flags');
  const byName = new Map(result.rows.map((row) => [row.name, row.value]));
  return {
    queue_paused: byName.get('queue_paused') === true,
    maintenance_mode: byName.get('maintenance_mode') === true,
  };
}

export async function setFlag(tx: Queryable, name: FlagName, value: boolean, updatedBy: string): Promise<void> {
  await tx.query(
    `INSERT INTO flags (name, value, updated_by, updated_at) VALUES ($1, $2::jsonb, $3, clock_timestamp())
     ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at`,
    [name, JSON.stringify(value), updatedBy],
  );
}

/** Reads the operator flags holding their row locks, so concurrent pause/resume commands see each other's change. */
export async function lockOperatorFlags(tx: Queryable): Promise<OperatorFlags> {
  await tx.query(`SELECT name FROM flags WHERE name IN ('queue_paused', 'maintenance_mode') ORDER BY name FOR UPDATE`);
  return readFlags(tx);
}
