import type { Queryable } from './store.ts';
import { containsPattern } from './sql-params.ts';

export interface AuditEventInput {
  entity_type: string;
  entity_id: string;
  /** `<entity>.<action>`, e.g. `paper_review.draft_rewritten`. */
  event_type: string;
  payload?: Record<string, unknown>;
  /** Business key: appending the same event_type + key twice keeps the first event. */
  idempotency_key?: string | null;
  actor?: string | null;
  request_id?: string | null;
}

export interface AuditEvent {
  id: number;
  entity_type: string;
  entity_id: string;
  event_type: string;
  payload: Record<string, unknown>;
  idempotency_key: string | null;
  actor: string | null;
  request_id: string | null;
  created_at: string;
}

export interface AuditEventFilters {
  entity_type?: string;
  entity_id?: string;
  event_type?: string;
  /** Case-insensitive substring over every string field and the payload. */
  search?: string;
  /** JSON containment: events whose payload contains this object. */
  payload?: Record<string, unknown>;
}

export const AUDIT_EVENT_COLUMNS = 'id, entity_type, entity_id, event_type, payload, idempotency_key, actor, request_id, created_at';
const COLUMNS = AUDIT_EVENT_COLUMNS;

interface AuditEventRow extends Omit<AuditEvent, 'created_at'> {
  created_at: Date | string;
}

export const toAuditEvent = (row: AuditEventRow): AuditEvent => ({
  ...row,
  id: Number(row.id),
  created_at: new Date(row.created_at).toISOString(),
});

/**
 * Appends one audit event. Call it with the transaction that makes the change it records, so the change and its
 * event commit together. With an idempotency_key, a replay returns the event already stored.
 */
export async function appendAuditEvent(tx: Queryable, input: AuditEventInput): Promise<AuditEvent> {
  const params = [
    input.entity_type,
    input.entity_id,
    input.event_type,
    JSON.stringify(input.payload ?? {}),
    input.idempotency_key ?? null,
    input.actor ?? null,
    input.request_id ?? null,
  ];
  const inserted = await tx.query<AuditEventRow>(
    `INSERT INTO audit_events (entity_type, entity_id, event_type, payload, idempotency_key, actor, request_id)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7)
     ON CONFLICT (event_type, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
     RETURNING ${COLUMNS}`,
    params,
  );
  if (inserted.rows[0]) return toAuditEvent(inserted.rows[0]);
  const existing = await tx.query<AuditEventRow>(
    `SELECT ${COLUMNS} FROM audit_events WHERE event_type = $1 AND idempotency_key = $2`,
    [input.event_type, input.idempotency_key],
  );
  return toAuditEvent(existing.rows[0]!);
}

function whereClause(filters: AuditEventFilters, params: unknown[]): string {
  const conditions: string[] = [];
  const bind = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  if (filters.entity_type) conditions.push(`entity_type = ${bind(filters.entity_type)}`);
  if (filters.entity_id) conditions.push(`entity_id = ${bind(filters.entity_id)}`);
  if (filters.event_type) conditions.push(`event_type = ${bind(filters.event_type)}`);
  if (filters.payload) conditions.push(`payload @> ${bind(JSON.stringify(filters.payload))}::jsonb`);
  if (filters.search) {
    const pattern = bind(containsPattern(filters.search));
    conditions.push(
      `(entity_type ILIKE ${pattern} OR entity_id ILIKE ${pattern} OR event_type ILIKE ${pattern}
        OR coalesce(actor, '') ILIKE ${pattern} OR payload::text ILIKE ${pattern})`,
    );
  }
  return conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
}

/** One page of events, newest first, with the total count of matching events, in one round trip. */
export async function listAuditEventsPage(
  db: Queryable,
  filters: AuditEventFilters,
  page: { offset: number; limit: number },
): Promise<{ items: AuditEvent[]; total: number }> {
  const params: unknown[] = [];
  const where = whereClause(filters, params);
  const totalSql = where
    ? `SELECT count(*) AS total FROM audit_events ${where}`
    : 'SELECT sum(events) AS total FROM audit_event_totals';
  // The lateral join keeps the total even when the page itself is empty (a page past the end).
  const result = await db.query<AuditEventRow & { total: number | string }>(
    `SELECT totals.total, page.* FROM (${totalSql}) AS totals
     LEFT JOIN LATERAL (
       SELECT ${COLUMNS} FROM audit_events ${where} ORDER BY id DESC LIMIT ${page.limit} OFFSET ${page.offset}
     ) AS page ON true`,
    params,
  );
  const total = Number(result.rows[0]?.total ?? 0);
  const items = result.rows.filter((row) => row.id !== null).map(({ total: _total, ...row }) => toAuditEvent(row));
  return { items, total };
}

/** Keyset read for the v1 API: up to `limit` events older than `beforeId`, newest first. */
export async function listAuditEventsBefore(
  db: Queryable,
  filters: AuditEventFilters,
  page: { beforeId?: number; limit: number },
): Promise<AuditEvent[]> {
  const params: unknown[] = [];
  let where = whereClause(filters, params);
  if (page.beforeId !== undefined) {
    params.push(page.beforeId);
    where = `${where ? `${where} AND` : 'WHERE'} id < $${params.length}`;
  }
  const rows = await db.query<AuditEventRow>(
    `SELECT ${COLUMNS} FROM audit_events ${where} ORDER BY id DESC LIMIT ${page.limit}`,
    params,
  );
  return rows.rows.map(toAuditEvent);
}
