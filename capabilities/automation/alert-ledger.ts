import type { AlertFacts, Finding } from './domain/alert-findings.ts';
import type { Queryable } from '../../platform/store/store.ts';

/** The ledgers of queue alerts (migration 0013) and the reads a check makes. Every list is capped. */

const MAX_PER_KIND = 50;
const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

export async function queueAlertFacts(q: Queryable): Promise<Omit<AlertFacts, 'workers'>> {
  const [waiting, held, timedOut] = await Promise.all([
    q.query<AlertFacts['waitingRuns'][number]>(
      `SELECT r.run_id, r.project_id, r.state,
              ${iso('greatest(r.updated_at, coalesce((SELECT max(c.received_at) FROM worker_callbacks c WHERE c.run_id = r.run_id), r.updated_at))')} AS last_heard_at
         FROM runs r WHERE r.state IN ('awaiting_wake', 'running') ORDER BY r.updated_at LIMIT ${MAX_PER_KIND}`,
    ),
    q.query<AlertFacts['heldItems'][number]>(
      `SELECT project_id, status, ${iso('updated_at')} AS since, last_error FROM queue_items
        WHERE status IN ('dispatch_error', 'blocked', 'needs_review') ORDER BY updated_at LIMIT ${MAX_PER_KIND * 3}`,
    ),
    q.query<AlertFacts['timedOutRuns'][number]>(
      `SELECT run_id, project_id, ${iso('updated_at')} AS since, last_error FROM runs
        WHERE state = 'gate_timeout' AND updated_at > now() - interval '7 days' ORDER BY updated_at DESC LIMIT ${MAX_PER_KIND}`,
    ),
  ]);
  return { waitingRuns: waiting.rows, heldItems: held.rows, timedOutRuns: timedOut.rows };
}

/** When each of these findings was last taken by a channel. */
export async function lastNotified(q: Queryable, keys: readonly string[]): Promise<Map<string, string>> {
  if (keys.length === 0) return new Map();
  const result = await q.query<{ finding_key: string; at: string }>(
    `SELECT finding_key, ${iso('max(notified_at)')} AS at FROM alert_notices WHERE finding_key = ANY($1::text[]) GROUP BY finding_key`,
    [keys],
  );
  return new Map(result.rows.map((row) => [row.finding_key, row.at]));
}

export interface AlertCheckInsert {
  trigger: 'api' | 'schedule';
  force_notify: boolean;
  findings: readonly Finding[];
  sent: readonly { channel: string; ok: boolean; status: number | null; error?: string }[];
  suppressed_by_cooldown: number;
  /** Keys of the findings a channel took: the cooldown starts for them. */
  notified: readonly string[];
}

export async function recordAlertCheck(tx: Queryable, check: AlertCheckInsert): Promise<number> {
  const inserted = await tx.query<{ check_id: string }>(
    `INSERT INTO alert_checks (trigger, force_notify, findings, sent, suppressed_by_cooldown) VALUES ($1, $2, $3::jsonb, $4::jsonb, $5) RETURNING check_id`,
    [check.trigger, check.force_notify, JSON.stringify(check.findings), JSON.stringify(check.sent), check.suppressed_by_cooldown],
  );
  const checkId = Number(inserted.rows[0]!.check_id);
  if (check.notified.length > 0) {
    await tx.query(`INSERT INTO alert_notices (finding_key, check_id) SELECT key, $2 FROM unnest($1::text[]) AS key`, [check.notified, checkId]);
  }
  return checkId;
}

export interface AlertCheckRow {
  check_id: number;
  trigger: string;
  force_notify: boolean;
  findings: Finding[];
  sent: { channel: string; ok: boolean; status: number | null; error?: string }[];
  suppressed_by_cooldown: number;
  checked_at: string;
}

export async function latestAlertChecks(q: Queryable, limit: number): Promise<AlertCheckRow[]> {
  const result = await q.query<AlertCheckRow & { check_id: string }>(
    `SELECT check_id, trigger, force_notify, findings, sent, suppressed_by_cooldown, ${iso('checked_at')} AS checked_at
       FROM alert_checks ORDER BY check_id DESC LIMIT $1`,
    [limit],
  );
  return result.rows.map((row) => ({ ...row, check_id: Number(row.check_id) }));
}

/**
 * Claims the findings no other check has claimed within `cooldownSec` (0: any not claimed at this very moment) for
 * `holder`, in one statement, so checks running at once split the findings between them; answers the keys now held.
 */
export async function claimAlertSends(q: Queryable, keys: readonly string[], holder: string, cooldownSec: number): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const claimed = await q.query<{ finding_key: string }>(
    `INSERT INTO alert_send_claims (finding_key, holder) SELECT key, $2 FROM unnest($1::text[]) AS key
     ON CONFLICT (finding_key) DO UPDATE SET holder = excluded.holder, claimed_at = excluded.claimed_at
       WHERE alert_send_claims.claimed_at <= clock_timestamp() - $3 * interval '1 second'
     RETURNING finding_key`,
    [keys, holder, cooldownSec],
  );
  return new Set(claimed.rows.map((row) => row.finding_key));
}

/** Gives `holder`'s claims on these findings back (no channel took them), so the next check sends them. */
export async function releaseAlertSends(q: Queryable, keys: readonly string[], holder: string): Promise<void> {
  if (keys.length === 0) return;
  await q.query('DELETE FROM alert_send_claims WHERE finding_key = ANY($1::text[]) AND holder = $2', [keys, holder]);
}
