import { isRunOwned, QUEUE_ITEM_COMMANDS, type QueueStatus } from '../runs/domain/queue-status.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { lockOperatorFlags, setFlag, type FlagName, type OperatorFlags } from '../runs/queue-flags.ts';
import { getProject } from '../runs/projects.ts';
import { getQueueItem, parkQueueItem, requeueQueueItem, type QueueItemRow } from '../runs/queue-items.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';

/**
 * Operator commands on the queue (docs/http.md#http-interface): pause and resume dispatch, park one item, put one item back in the
 * queue. Each runs in one transaction that locks what it changes and appends its audit event; a command that would
 * change nothing answers `changed: false` and appends nothing.
 */

export interface PauseRequest {
  reason: string;
  paused_by: string;
  /** Also switch maintenance mode on; false leaves it as it is. */
  maintenance_mode: boolean;
}

export interface ResumeRequest {
  resumed_by: string;
}

export interface MarkPausedRequest {
  project_id: string;
  reason: string;
  updated_by: string;
}

export interface RequeueRequest {
  project_id: string;
  requested_by: string;
}

/** Who asked, for the audit event. */
export interface CommandContext {
  request_id?: string | undefined;
}

export interface FlagsCommandResult {
  ok: true;
  flags: OperatorFlags;
  changed: boolean;
}

export interface QueueItemCommandResult {
  ok: true;
  changed: boolean;
  queue_item: QueueItemRow;
}

/** Statuses an item may be parked from; in-flight rows belong to their run and are never touched here. */
export const MARK_PAUSED_FROM: readonly QueueStatus[] = QUEUE_ITEM_COMMANDS.mark_paused;
export const REQUEUE_FROM: readonly QueueStatus[] = QUEUE_ITEM_COMMANDS.requeue;

async function setChangedFlags(tx: Queryable, before: OperatorFlags, after: OperatorFlags, actor: string): Promise<boolean> {
  const changed = (Object.keys(after) as FlagName[]).filter((name) => before[name] !== after[name]);
  for (const name of changed) await setFlag(tx, name, after[name], actor);
  return changed.length > 0;
}

async function lockedItem(tx: Queryable, projectId: string): Promise<QueueItemRow> {
  const item = await getQueueItem(tx, projectId, { forUpdate: true });
  if (item) return item;
  if (await getProject(tx, projectId)) throw new CommandRefusedError(404, `project '${projectId}' has no queue item`);
  throw new CommandRefusedError(404, `unknown project '${projectId}'`);
}

function refuseInFlight(item: QueueItemRow): void {
  if (isRunOwned(item.status)) {
    throw new CommandRefusedError(
      409,
      `project '${item.project_id}' is ${item.status} (in flight, run '${item.current_run_id ?? 'unknown'}'); cancel the run first`,
    );
  }
}

export function createQueueOperator(store: Store) {
  return {
    async pause(request: PauseRequest, context: CommandContext = {}): Promise<FlagsCommandResult> {
      return store.transaction(async (tx) => {
        const before = await lockOperatorFlags(tx);
        const after = { queue_paused: true, maintenance_mode: before.maintenance_mode || request.maintenance_mode };
        const changed = await setChangedFlags(tx, before, after, request.paused_by);
        if (changed) {
          await appendAuditEvent(tx, {
            entity_type: 'queue',
            entity_id: 'queue',
            event_type: 'queue.paused',
            payload: { reason: request.reason, maintenance_mode: request.maintenance_mode, before, after },
            actor: request.paused_by,
            request_id: context.request_id ?? null,
          });
        }
        return { ok: true, flags: after, changed };
      });
    },

    async resume(request: ResumeRequest, context: CommandContext = {}): Promise<FlagsCommandResult> {
      return store.transaction(async (tx) => {
        const before = await lockOperatorFlags(tx);
        const after = { queue_paused: false, maintenance_mode: false };
        const changed = await setChangedFlags(tx, before, after, request.resumed_by);
        if (changed) {
          await appendAuditEvent(tx, {
            entity_type: 'queue',
            entity_id: 'queue',
            event_type: 'queue.resumed',
            payload: { before, after },
            actor: request.resumed_by,
            request_id: context.request_id ?? null,
          });
        }
        return { ok: true, flags: after, changed };
      });
    },

    /**
     * Parks one item. The reason goes to next_action_hint, not last_error: last_error keeps the item's last failure,
     * which is still what an operator needs to see when deciding to requeue it.
     */
    async markPaused(request: MarkPausedRequest, context: CommandContext = {}): Promise<QueueItemCommandResult> {
      return store.transaction(async (tx) => {
        const item = await lockedItem(tx, request.project_id);
        if (item.status === 'paused') return { ok: true, changed: false, queue_item: item };
        refuseInFlight(item);
        if (!MARK_PAUSED_FROM.includes(item.status)) {
          throw new CommandRefusedError(
            409,
            `project '${item.project_id}' is ${item.status}; only ${MARK_PAUSED_FROM.join(', ')} items can be paused`,
          );
        }
        const updated = await parkQueueItem(tx, item.project_id, `paused by ${request.updated_by}: ${request.reason}`);
        await appendAuditEvent(tx, {
          entity_type: 'queue_item',
          entity_id: item.project_id,
          event_type: 'queue_item.marked_paused',
          payload: { reason: request.reason, from_status: item.status, to_status: 'paused' },
          actor: request.updated_by,
          request_id: context.request_id ?? null,
        });
        return { ok: true, changed: true, queue_item: updated };
      });
    },

    /**
     * Puts one item back in the queue with a clean slate: review flag off, failure streak reset, no lane, no hint.
     * last_error, current_run_id and last_run_state stay as the history of the last attempt.
     */
    async requeue(request: RequeueRequest, context: CommandContext = {}): Promise<QueueItemCommandResult> {
      return store.transaction(async (tx) => {
        const item = await lockedItem(tx, request.project_id);
        if (item.status === 'queued' && !item.manual_review_required) return { ok: true, changed: false, queue_item: item };
        refuseInFlight(item);
        if (item.status !== 'queued' && !REQUEUE_FROM.includes(item.status)) {
          throw new CommandRefusedError(
            409,
            `project '${item.project_id}' is ${item.status}; only ${REQUEUE_FROM.join(', ')} items can be requeued`,
          );
        }
        const updated = await requeueQueueItem(tx, item.project_id);
        await appendAuditEvent(tx, {
          entity_type: 'queue_item',
          entity_id: item.project_id,
          event_type: 'queue_item.requeued',
          payload: {
            from_status: item.status,
            to_status: 'queued',
            cleared_manual_review: item.manual_review_required,
            reset_dispatch_failures: item.dispatch_failures,
          },
          actor: request.requested_by,
          request_id: context.request_id ?? null,
        });
        return { ok: true, changed: true, queue_item: updated };
      });
    },
  };
}

export type QueueOperator = ReturnType<typeof createQueueOperator>;
