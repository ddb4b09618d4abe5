/**
 * Core (`/svc-core`, docs/core.md#core): snapshots of a workflow tool's queue and paper rows, the queue projection read
 * from the latest one, and what `compare` and `enforce` do with a snapshot against the live queue. Pure.
 */
import type { PaperStatus, ReviewStatus } from '../../papers/domain/paper-status.ts';
import { isRunOwned, QUEUE_STATUSES, type QueueStatus } from '../../runs/domain/queue-status.ts';
import type { WorkloadClass } from '../../../worker-gate/contract/workload.ts';

export const CORE_MODES = ['off', 'shadow', 'compare', 'enforce'] as const;
export type CoreMode = (typeof CORE_MODES)[number];

export const PROJECTION_VERSION = 'svc-core.queue.v1';

/** Most active rows a projection lists, and most warnings any answer carries. */
export const CORE_LIMITS = { active_rows: 50, warnings: 50 } as const;

/**
 * The fields Core reads from a queue row. A row as sent may carry any others (a compatible source's own bookkeeping);
 * they stay in the stored snapshot and nothing here looks at them.
 */
export interface CoreQueueRow {
  project_id: string;
  project_name?: string | undefined;
  status: QueueStatus;
  manual_review_required?: boolean | undefined;
  dispatch_priority?: number | undefined;
  selection_rank?: number | undefined;
  machine_target?: string | null | undefined;
  workload_class?: WorkloadClass | undefined;
  current_run_id?: string | null | undefined;
}

/** The fields Core reads from a paper row; any others it carries are kept in the stored snapshot and ignored. */
export interface CorePaperRow {
  paper_id: string;
  project_id?: string | undefined;
  run_id?: string | undefined;
  paper_status: PaperStatus;
  review_status?: ReviewStatus | undefined;
  rank_score?: number | undefined;
}

// Every field of CoreQueueRow once: `satisfies` fails the build when the interface gains a field this list lacks.
const QUEUE_ROW_FIELDS = Object.keys({
  project_id: true,
  project_name: true,
  status: true,
  manual_review_required: true,
  dispatch_priority: true,
  selection_rank: true,
  machine_target: true,
  workload_class: true,
  current_run_id: true,
} satisfies Record<keyof CoreQueueRow, true>) as (keyof CoreQueueRow)[];

/** A queue row as Core reads it: the fields of CoreQueueRow it carries, without the others a source sent along. */
export function readQueueRow(row: CoreQueueRow): CoreQueueRow {
  return Object.fromEntries(QUEUE_ROW_FIELDS.filter((field) => field in row).map((field) => [field, row[field]])) as unknown as CoreQueueRow;
}

/** Paper statuses whose draft may be polished (rewritten) while its review is still open. */
const POLISHABLE: readonly PaperStatus[] = ['draft_review', 'publication_draft', 'human_review_required'];
const FINAL_REVIEWS: readonly ReviewStatus[] = ['finalized', 'rejected'];

/** Rows by id, the last occurrence winning, and the ids that occurred more than once. */
function lastById<Row>(rows: readonly Row[], id: (row: Row) => string): { rows: Row[]; duplicates: string[] } {
  const byId = new Map<string, Row>();
  const duplicates = new Set<string>();
  for (const row of rows) {
    if (byId.has(id(row))) duplicates.add(id(row));
    byId.set(id(row), row);
  }
  return { rows: [...byId.values()], duplicates: [...duplicates].sort() };
}

export const uniqueQueueRows = (rows: readonly CoreQueueRow[]) => lastById(rows, (row) => row.project_id);

/** At most CORE_LIMITS.warnings lines, the last saying how many more there were. */
export function capWarnings(warnings: readonly string[]): string[] {
  if (warnings.length <= CORE_LIMITS.warnings) return [...warnings];
  return [...warnings.slice(0, CORE_LIMITS.warnings - 1), `… and ${warnings.length - CORE_LIMITS.warnings + 1} more`];
}

export interface QueueProjection {
  total_queue_rows: number;
  total_paper_rows: number;
  status_counts: Record<QueueStatus, number>;
  active_rows: CoreQueueRow[];
  draft_candidate_count: number;
  polish_candidate_count: number;
  warnings: string[];
}

/**
 * The queue a snapshot describes: one row per project (a repeated project_id keeps its last row) and per paper,
 * statuses counted, rows in flight listed (by project_id, at most CORE_LIMITS.active_rows, with the fields Core reads
 * alone), papers waiting for a first draft (`eligible`) and papers whose draft may still be polished (drafted, review
 * not final).
 */
export function projectQueue(snapshot: { queue_rows: readonly CoreQueueRow[]; paper_rows: readonly CorePaperRow[] }): QueueProjection {
  const queue = uniqueQueueRows(snapshot.queue_rows);
  const papers = lastById(snapshot.paper_rows, (row) => row.paper_id);
  const statusCounts = Object.fromEntries(QUEUE_STATUSES.map((status) => [status, 0])) as Record<QueueStatus, number>;
  for (const row of queue.rows) statusCounts[row.status] += 1;
  const active = queue.rows.filter((row) => isRunOwned(row.status)).sort((a, b) => (a.project_id < b.project_id ? -1 : 1));
  const warnings = [
    ...queue.duplicates.map((id) => `project_id ${id} appears more than once in queue_rows; the last row counts`),
    ...papers.duplicates.map((id) => `paper_id ${id} appears more than once in paper_rows; the last row counts`),
  ];
  if (active.length > CORE_LIMITS.active_rows) warnings.push(`${active.length} rows are in flight; the first ${CORE_LIMITS.active_rows} are listed`);
  return {
    total_queue_rows: queue.rows.length,
    total_paper_rows: papers.rows.length,
    status_counts: statusCounts,
    active_rows: active.slice(0, CORE_LIMITS.active_rows).map(readQueueRow),
    draft_candidate_count: papers.rows.filter((paper) => paper.paper_status === 'eligible').length,
    polish_candidate_count: papers.rows.filter(
      (paper) => POLISHABLE.includes(paper.paper_status) && !FINAL_REVIEWS.includes(paper.review_status ?? 'unreviewed'),
    ).length,
    warnings: capWarnings(warnings),
  };
}

/** A live queue row, as far as compare and enforce look at it. */
export interface LiveQueueRow {
  project_id: string;
  status: QueueStatus;
  manual_review_required: boolean;
  dispatch_priority: number;
  selection_rank: number;
}

/**
 * Where the snapshot and the live queue disagree (`compare`), one line each. `live` holds the live rows the snapshot
 * names; `outside` the live rows it does not name (a few ids and how many).
 */
export function compareWithLive(
  snapshotRows: readonly CoreQueueRow[],
  live: readonly LiveQueueRow[],
  outside: { ids: readonly string[]; count: number },
): string[] {
  const liveById = new Map(live.map((row) => [row.project_id, row]));
  const warnings: string[] = [];
  for (const row of uniqueQueueRows(snapshotRows).rows) {
    const current = liveById.get(row.project_id);
    if (!current) warnings.push(`${row.project_id}: in the snapshot (${row.status}) but not in the live queue`);
    else if (current.status !== row.status) warnings.push(`${row.project_id}: the snapshot says ${row.status}, the live queue ${current.status}`);
  }
  if (outside.count > 0) {
    warnings.push(`${outside.count} live item(s) are not in the snapshot: ${outside.ids.join(', ')}${outside.count > outside.ids.length ? ', …' : ''}`);
  }
  return capWarnings(warnings);
}

export const SKIP_REASONS = ['duplicate_project_id', 'not_in_live_queue', 'live_row_in_flight', 'in_flight_status_not_applied', 'unchanged'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

export interface QueueRowChange {
  project_id: string;
  status: QueueStatus;
  manual_review_required: boolean;
  dispatch_priority: number;
  selection_rank: number;
  /** The fields that change, with their live values. */
  from: Partial<Omit<LiveQueueRow, 'project_id'>>;
}

/**
 * What `enforce` writes: the snapshot's status, flag, priority and rank onto live rows, never onto a row in flight
 * and never into a status in flight (only a run's workflow puts an item in flight); it creates no rows. Every
 * snapshot row is applied or counted under one skip reason.
 */
export function planEnforce(snapshotRows: readonly CoreQueueRow[], live: readonly LiveQueueRow[]): { changes: QueueRowChange[]; skipped: Record<SkipReason, number> } {
  const liveById = new Map(live.map((row) => [row.project_id, row]));
  const skipped = Object.fromEntries(SKIP_REASONS.map((reason) => [reason, 0])) as Record<SkipReason, number>;
  const { rows } = uniqueQueueRows(snapshotRows);
  skipped.duplicate_project_id = snapshotRows.length - rows.length;
  const changes: QueueRowChange[] = [];
  for (const row of rows) {
    const current = liveById.get(row.project_id);
    if (!current) skipped.not_in_live_queue += 1;
    else if (isRunOwned(current.status)) skipped.live_row_in_flight += 1;
    else if (isRunOwned(row.status)) skipped.in_flight_status_not_applied += 1;
    else {
      const wanted = {
        status: row.status,
        manual_review_required: row.manual_review_required ?? current.manual_review_required,
        dispatch_priority: row.dispatch_priority ?? current.dispatch_priority,
        selection_rank: row.selection_rank ?? current.selection_rank,
      };
      const from = Object.fromEntries(
        (Object.keys(wanted) as (keyof typeof wanted)[]).filter((key) => wanted[key] !== current[key]).map((key) => [key, current[key]]),
      );
      if (Object.keys(from).length === 0) skipped.unchanged += 1;
      else changes.push({ project_id: row.project_id, ...wanted, from });
    }
  }
  return { changes, skipped };
}
