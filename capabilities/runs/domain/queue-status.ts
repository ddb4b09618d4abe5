/** Queue item statuses and the logical queue groups (docs/queue.md#the-queue). Pure. */

export const QUEUE_STATUSES = [
  'queued',
  'dispatching',
  'running',
  'awaiting_wake',
  'wake_received',
  'reconciling',
  'completed',
  'paused',
  'canceled',
  'dispatch_error',
  'blocked',
  'needs_review',
  /** Its run waits out the model's usage limit, long enough that its lane was let go (docs/runs.md#waiting-out-a-usage-limit). */
  'usage_limited',
] as const;
export type QueueStatus = (typeof QUEUE_STATUSES)[number];

/** A row in one of these statuses is in flight: its run holds the row's lane. */
export const ACTIVE_QUEUE_STATUSES = [
  'dispatching',
  'running',
  'awaiting_wake',
  'wake_received',
  'reconciling',
] as const satisfies readonly QueueStatus[];
export type ActiveQueueStatus = (typeof ACTIVE_QUEUE_STATUSES)[number];

export function isQueueStatus(value: unknown): value is QueueStatus {
  return typeof value === 'string' && (QUEUE_STATUSES as readonly string[]).includes(value);
}

/**
 * A row in one of these statuses is owned by a run, and queue mutations must not overwrite it: in flight on its lane,
 * or waiting out a usage limit with its lane let go (the run takes a lane back when it resumes).
 */
export const RUN_OWNED_QUEUE_STATUSES = [...ACTIVE_QUEUE_STATUSES, 'usage_limited'] as const satisfies readonly QueueStatus[];
export type RunOwnedQueueStatus = (typeof RUN_OWNED_QUEUE_STATUSES)[number];

export function isRunOwned(status: string): status is RunOwnedQueueStatus {
  return (RUN_OWNED_QUEUE_STATUSES as readonly string[]).includes(status);
}

export const QUEUE_GROUPS = ['active', 'queued', 'blocked', 'paused', 'completed', 'all'] as const;
export type QueueGroup = (typeof QUEUE_GROUPS)[number];

export function isQueueGroup(value: unknown): value is QueueGroup {
  return typeof value === 'string' && (QUEUE_GROUPS as readonly string[]).includes(value);
}

/**
 * Statuses each group holds by status alone. `blocked` also holds every row with manual_review_required set, whatever
 * its status, so a flagged queued row is in both `queued` and `blocked`; `all` holds every row.
 */
export const QUEUE_GROUP_STATUSES: Readonly<Record<Exclude<QueueGroup, 'all'>, readonly QueueStatus[]>> = {
  active: RUN_OWNED_QUEUE_STATUSES,
  queued: ['queued'],
  blocked: ['blocked', 'needs_review', 'dispatch_error'],
  paused: ['paused'],
  completed: ['completed', 'canceled'],
};

export interface QueueGroupMember {
  status: QueueStatus;
  manual_review_required: boolean;
}

export function inQueueGroup(row: QueueGroupMember, group: QueueGroup): boolean {
  if (group === 'all') return true;
  if (group === 'blocked' && row.manual_review_required) return true;
  return QUEUE_GROUP_STATUSES[group].includes(row.status);
}

/** Every group the row appears in, in QUEUE_GROUPS order (always ends with `all`). */
export function queueGroupsOf(row: QueueGroupMember): QueueGroup[] {
  return QUEUE_GROUPS.filter((group) => inQueueGroup(row, group));
}

/** How many rows each group (tab) holds, from rows counted by status and review flag; a row may count in two. */
export function queueGroupCounts(groups: readonly (QueueGroupMember & { n: number })[]): Record<QueueGroup, number> {
  const counts = Object.fromEntries(QUEUE_GROUPS.map((group) => [group, 0])) as Record<QueueGroup, number>;
  for (const row of groups) for (const group of queueGroupsOf(row)) counts[group] += row.n;
  return counts;
}

/** Operator commands on one queue item (docs/queue.md#the-queue), and the statuses each may start from. */
export const QUEUE_ITEM_COMMANDS = {
  mark_paused: ['queued', 'blocked', 'needs_review', 'dispatch_error'],
  requeue: ['paused', 'blocked', 'needs_review', 'dispatch_error', 'canceled'],
  /** dispatch-next with the row's project_id (docs/runs.md#dispatching-the-item-you-chose); an unflagged row only. */
  dispatch: ['queued'],
} as const satisfies Record<string, readonly QueueStatus[]>;
export type QueueItemCommand = keyof typeof QUEUE_ITEM_COMMANDS;

/**
 * The commands an operator can give a row now: what a dashboard offers. Requeue also takes a flagged queued row,
 * since it clears the review flag; dispatch takes an unflagged one only.
 */
export function queueItemCommands(row: QueueGroupMember): QueueItemCommand[] {
  const commands: QueueItemCommand[] = [];
  if ((QUEUE_ITEM_COMMANDS.requeue as readonly QueueStatus[]).includes(row.status) || (row.status === 'queued' && row.manual_review_required)) commands.push('requeue');
  if ((QUEUE_ITEM_COMMANDS.mark_paused as readonly QueueStatus[]).includes(row.status)) commands.push('mark_paused');
  if ((QUEUE_ITEM_COMMANDS.dispatch as readonly QueueStatus[]).includes(row.status) && !row.manual_review_required) commands.push('dispatch');
  return commands;
}
