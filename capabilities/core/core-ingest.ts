import {
  compareWithLive,
  PROJECTION_VERSION,
  planEnforce,
  projectQueue,
  uniqueQueueRows,
  type CoreMode,
  type CorePaperRow,
  type CoreQueueRow,
  type QueueRowChange,
  type SkipReason,
} from './domain/core-snapshot.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { applyQueueRowChange, insertCoreSnapshot, latestCoreSnapshot, liveQueueRows, liveRowsOutside } from './store/core-snapshots.ts';
import { runIdempotent } from '../../platform/store/idempotency-keys.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';

/** Core (`/svc-core`, docs/core.md#core): snapshot ingest in four modes and the queue projection. */

export const CORE_SERVICE_NAME = 'svc-core';

export interface CoreSettings {
  /** core_mode: the mode of a snapshot that names none, and the mode health reports. */
  mode: CoreMode;
  /** core_enforce_enabled: whether a snapshot may ask for enforce. */
  enforceEnabled: boolean;
}

/** A snapshot as sent; its rows may carry fields beyond Core's, which are stored with them and otherwise ignored. */
export interface SnapshotRequest {
  idempotency_key: string;
  source?: string | undefined;
  mode?: CoreMode | undefined;
  queue_rows?: CoreQueueRow[] | undefined;
  paper_rows?: CorePaperRow[] | undefined;
  captured_at?: string | undefined;
}

/** The source a snapshot without one is recorded under. */
export const UNNAMED_SOURCE = 'unnamed';
/** How many live items outside the snapshot compare names. */
const OUTSIDE_SAMPLE = 5;

/** Core's snapshots and health on one store, as the composition root builds it once. */
export type Core = ReturnType<typeof createCore>;

export function createCore(store: Store, settings: CoreSettings) {
  async function record(tx: Queryable, body: SnapshotRequest, mode: Exclude<CoreMode, 'off'>, requestId: string) {
    const queueRows = body.queue_rows ?? [];
    const paperRows = body.paper_rows ?? [];
    const source = body.source ?? UNNAMED_SOURCE;
    const names = uniqueQueueRows(queueRows).rows.map((row) => row.project_id);
    const live = await liveQueueRows(tx, names, { forUpdate: mode === 'enforce' });
    const warnings = [...projectQueue({ queue_rows: queueRows, paper_rows: paperRows }).warnings];
    let skipped: Partial<Record<SkipReason, number>> = { duplicate_project_id: queueRows.length - names.length };
    const applied: QueueRowChange[] = [];
    if (mode === 'compare') warnings.push(...compareWithLive(queueRows, live, await liveRowsOutside(tx, names, OUTSIDE_SAMPLE)));
    if (mode === 'enforce') {
      const plan = planEnforce(queueRows, live);
      skipped = plan.skipped;
      for (const change of plan.changes) {
        // A row locked above cannot have gone in flight since; the guard is for a row inserted in between.
        if (await applyQueueRowChange(tx, change)) applied.push(change);
        else skipped.live_row_in_flight = (skipped.live_row_in_flight ?? 0) + 1;
      }
    }
    const event = await appendAuditEvent(tx, {
      entity_type: 'core_snapshot',
      entity_id: body.idempotency_key,
      event_type: 'core.snapshot_recorded',
      payload: { source, mode, queue_rows: queueRows.length, paper_rows: paperRows.length, applied: applied.length, skipped, warnings: warnings.length },
      idempotency_key: body.idempotency_key,
      actor: source,
      request_id: requestId,
    });
    const snapshotId = await insertCoreSnapshot(tx, {
      idempotency_key: body.idempotency_key,
      source,
      mode,
      captured_at: body.captured_at ?? new Date().toISOString(),
      queue_rows: queueRows,
      paper_rows: paperRows,
      warnings,
      applied,
      skipped,
      event_id: event.id,
    });
    const message =
      mode === 'enforce'
        ? `recorded; applied ${applied.length} queue row(s), skipped ${Object.values(skipped).reduce((sum, n) => sum + (n ?? 0), 0)}`
        : mode === 'compare'
          ? `recorded; ${warnings.length} warning(s)`
          : 'recorded (shadow: nothing else happened)';
    return {
      ok: true as const,
      mode,
      inserted: true,
      event_id: event.id,
      snapshot_id: snapshotId,
      queue_rows: queueRows.length,
      paper_rows: paperRows.length,
      would_apply: mode === 'enforce',
      message,
      warnings,
      applied: applied.map(({ project_id, from }) => ({ project_id, changed: Object.keys(from) })),
      skipped,
    };
  }

  return {
    /** Records (or, in off mode, only counts) one snapshot; replay-safe by idempotency key over the body as sent. */
    async ingest(body: SnapshotRequest, requestId: string) {
      const mode = body.mode ?? settings.mode;
      if (mode === 'enforce' && !settings.enforceEnabled) {
        throw new CommandRefusedError(403, 'enforce is not allowed by this configuration (core_enforce_enabled is false); send mode shadow or compare');
      }
      if (mode === 'off') {
        return {
          ok: true as const,
          mode,
          inserted: false,
          event_id: 0,
          snapshot_id: 0,
          queue_rows: body.queue_rows?.length ?? 0,
          paper_rows: body.paper_rows?.length ?? 0,
          would_apply: false,
          message: 'core mode off: nothing recorded',
        };
      }
      const { response, replayed } = await store.transaction((tx) =>
        runIdempotent(tx, { scope: 'svc-core.snapshot', key: body.idempotency_key, payload: body }, () => record(tx, body, mode, requestId)),
      );
      // The stored answer is the first call's; `inserted` is about this call, which inserted nothing on a replay.
      return replayed ? { ...response, inserted: false } : response;
    },

    /** The queue projection of the latest recorded snapshot (of one source when given). */
    async projection(source?: string) {
      const latest = await latestCoreSnapshot(store.reads, source);
      const projection = projectQueue(latest ?? { queue_rows: [], paper_rows: [] });
      return {
        ok: true as const,
        mode: settings.mode,
        projection_version: PROJECTION_VERSION,
        snapshot: latest
          ? { snapshot_id: latest.snapshot_id, source: latest.source, mode: latest.mode, captured_at: latest.captured_at, recorded_at: latest.recorded_at }
          : null,
        ...projection,
        warnings: latest ? projection.warnings : ['no snapshot has been recorded yet'],
      };
    },

    /** ok is false, with the reason, when the store does not answer. */
    async health(dbPath: string) {
      const answer = { service: CORE_SERVICE_NAME, mode: settings.mode, db_path: dbPath, timestamp: new Date().toISOString() };
      try {
        await store.ping();
        return { ok: true, ...answer };
      } catch (error) {
        return { ok: false, ...answer, error: `the store does not answer: ${error instanceof Error ? error.message : String(error)}` };
      }
    },
  };
}
