import { currentRequestId } from './request-context.ts';
import { selectPage, type PageWindow } from './paging.ts';
import { containsPattern, sqlParams, type SqlParams } from './sql-params.ts';
import type { Queryable } from './store.ts';

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
    // Written for an HTTP request (or a workflow one started) unless the caller names the request itself.
    input.request_id ?? currentRequestId(),
  ];
  const inserted = await tx.query<AuditEvent>(
    `INSERT INTO audit_events (entity_type, entity_id, event_type, payload, idempotency_key, actor, request_id)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7)
     ON CONFLICT (event_type, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
     RETURNING ${COLUMNS}`,
    params,
  );
  if (inserted.rows[0]) return inserted.rows[0];
  const existing = await tx.query<AuditEvent>(
    `SELECT ${COLUMNS} FROM audit_events WHERE event_type = $1 AND idempotency_key = $2`,
    [input.event_type, input.idempotency_key],
  );
  return existing.rows[0]!;
}

function whereClause(filters: AuditEventFilters, { bind }: SqlParams): string {
  const conditions: string[] = [];
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
  window: PageWindow,
): Promise<{ items: AuditEvent[]; total: number }> {
  const sql = sqlParams();
  const where = whereClause(filters, sql);
  return selectPage<AuditEvent>(db, {
    select: `SELECT ${COLUMNS} FROM audit_events ${where} ORDER BY id DESC`,
    // The unfiltered total is kept by a trigger: counting every event per page view is too slow.
    count: where
      ? `SELECT count(*) AS total FROM audit_events ${where}`
      : 'SELECT sum(events) AS total FROM audit_event_totals',
    key: 'id',
    sql,
    window,
  });
}

/** Keyset read for the v1 API: up to `limit` events older than `beforeId`, newest first. */
export async function listAuditEventsBefore(
  db: Queryable,
  filters: AuditEventFilters,
  page: { beforeId?: number; limit: number },
): Promise<AuditEvent[]> {
  const sql = sqlParams();
  let where = whereClause(filters, sql);
  if (page.beforeId !== undefined) where = `${where ? `${where} AND` : 'WHERE'} id < ${sql.bind(page.beforeId)}`;
  const result = await db.query<AuditEvent>(
    `SELECT ${COLUMNS} FROM audit_events ${where} ORDER BY id DESC LIMIT ${sql.bind(page.limit)}`,
    sql.params,
  );
  return result.rows;
}

/** The event of this type appended with this idempotency key, if any: a step's record that it already happened. */
export async function findAuditEventByKey(q: Queryable, eventType: string, key: string): Promise<AuditEvent | undefined> {
  const result = await q.query<AuditEvent>(`SELECT ${COLUMNS} FROM audit_events WHERE event_type = $1 AND idempotency_key = $2`, [eventType, key]);
  return result.rows[0];
}
