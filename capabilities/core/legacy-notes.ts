import { readQueueRow, uniqueQueueRows } from './domain/core-snapshot.ts';
import { listAuditEventsBefore } from '../../platform/store/audit-events.ts';
import { latestCoreSnapshot } from './store/core-snapshots.ts';
import type { Queryable } from '../../platform/store/store.ts';

/** The Core source a legacy notes sync posts its snapshots under. */
export const LEGACY_NOTES_SOURCE = 'legacy_notes';

export const LEGACY_NOTES_LIMITS = { queued_projects: 100, events: 20 } as const;

/**
 * `GET /control/api/intake/legacy-notes` (docs/core.md#core): the latest snapshot the legacy notes sync posted, the
 * projects it has queued (in dispatch order, the fields Core reads), how many of its rows were skipped and why, and
 * its recent ingests.
 */
export async function readLegacyNotes(q: Queryable) {
  const [latest, events] = await Promise.all([
    latestCoreSnapshot(q, LEGACY_NOTES_SOURCE),
    listAuditEventsBefore(q, { event_type: 'core.snapshot_recorded', payload: { source: LEGACY_NOTES_SOURCE } }, { limit: LEGACY_NOTES_LIMITS.events }),
  ]);
  const queued = latest
    ? uniqueQueueRows(latest.queue_rows)
        .rows.filter((row) => row.status === 'queued')
        .sort(
          (a, b) =>
            (a.dispatch_priority ?? 50) - (b.dispatch_priority ?? 50) ||
            (a.selection_rank ?? 50) - (b.selection_rank ?? 50) ||
            (a.project_id < b.project_id ? -1 : 1),
        )
    : [];
  return {
    ok: true as const,
    source: LEGACY_NOTES_SOURCE,
    latest_ingest: latest
      ? {
          snapshot_id: latest.snapshot_id,
          mode: latest.mode,
          captured_at: latest.captured_at,
          recorded_at: latest.recorded_at,
          queue_rows: latest.queue_row_count,
          paper_rows: latest.paper_row_count,
          event_id: latest.event_id,
          warnings: latest.warnings,
        }
      : null,
    queued_projects: { count: queued.length, items: queued.slice(0, LEGACY_NOTES_LIMITS.queued_projects).map(readQueueRow) },
    skipped_reasons: latest ? Object.fromEntries(Object.entries(latest.skipped).filter(([, n]) => (n ?? 0) > 0)) : {},
    recent_events: events,
  };
}
