/**
 * The operator overview's five canonical lanes (docs/console.md#read-models, overview) and what needs a person first. Pure:
 * the store counts rows by their classifying columns and these rules put each group in its lane, so the rule lives
 * here once.
 *
 * - attention: a queue item in the `blocked` tab (blocked, needs_review, dispatch_error, or flagged
 *   manual_review_required whatever its status), and a paper whose automated checklist failed
 *   (`human_review_required`). Attention comes first: a flagged item in flight is counted here, not in running.
 * - running: a queue item in flight (dispatching, running, awaiting_wake, wake_received, reconciling).
 * - write: a completed run waiting for its first draft (paper pipeline `write_needed`).
 * - publish: a finalized paper not yet imported into a corpus (`publish_ready`).
 * - imported: a paper with a corpus import (`published_imported`).
 * Queued, paused and finished items, and papers being drafted or reviewed, are in no lane.
 */
import type { PaperPipelineCounts } from '../../papers/domain/paper-candidacy.ts';
import type { PaperStatus } from '../../papers/domain/paper-status.ts';
import { isRunOwned, QUEUE_GROUP_STATUSES, type QueueStatus } from '../../runs/domain/queue-status.ts';

export const OPERATOR_LANES = ['attention', 'running', 'write', 'publish', 'imported'] as const;
export type OperatorLane = (typeof OPERATOR_LANES)[number];
export type OperatorLaneCounts = Record<OperatorLane, number>;

export interface QueueRowFacts {
  status: QueueStatus;
  manual_review_required: boolean;
}

/** The lane of a queue item: attention or running, or none. */
export function queueItemLane(item: QueueRowFacts): 'attention' | 'running' | null {
  if (item.manual_review_required || (QUEUE_GROUP_STATUSES.blocked as readonly string[]).includes(item.status)) return 'attention';
  return isRunOwned(item.status) ? 'running' : null;
}

/** The paper status that puts a paper in the attention lane. */
export const PAPER_ATTENTION_STATUS: PaperStatus = 'human_review_required';

/** Lane counts from queue rows grouped by their facts, papers grouped by status, and the paper pipeline counts. */
export function operatorLaneCounts(
  queueGroups: readonly (QueueRowFacts & { n: number })[],
  papersByStatus: Partial<Record<PaperStatus, number>>,
  pipeline: PaperPipelineCounts,
): OperatorLaneCounts {
  const counts: OperatorLaneCounts = { attention: 0, running: 0, write: pipeline.write_needed, publish: pipeline.publish_ready, imported: pipeline.published_imported };
  for (const group of queueGroups) {
    const lane = queueItemLane(group);
    if (lane) counts[lane] += group.n;
  }
  counts.attention += papersByStatus[PAPER_ATTENTION_STATUS] ?? 0;
  return counts;
}

/** Why an actionable thing needs a person, most urgent first. */
export const ACTION_REASONS = [
  'agent_question',
  'dispatch_error',
  'blocked',
  'quiet_window_overdue',
  'manual_review',
  'paper_human_review',
  'paper_import',
] as const;
export type ActionReason = (typeof ACTION_REASONS)[number];

/** The reason an attention-lane queue item needs a person; null for an item in no attention. */
export function queueItemAction(item: QueueRowFacts): ActionReason | null {
  if (item.status === 'needs_review') return 'agent_question';
  // Only the agent's question flags a running item (operators' queue commands refuse items in flight): its run waits on an answer.
  if (item.status === 'running' && item.manual_review_required) return 'agent_question';
  if (item.status === 'dispatch_error') return 'dispatch_error';
  if (item.status === 'blocked') return 'blocked';
  return item.manual_review_required ? 'manual_review' : null;
}

export const ACTION_HINTS: Readonly<Record<ActionReason, string>> = {
  agent_question: "the agent asked a question: answer it on the run's page (or rcp runs answer), and its session resumes; a question left unanswered past agent_question_wait_sec leaves the item in needs_review, to requeue",
  dispatch_error: 'dispatch kept failing: fix the worker or the item, then requeue',
  blocked: 'the run stopped on its worker: inspect it, then requeue or cancel',
  quiet_window_overdue:
    'the run has waited on its quiet window far longer than idle_sustain_sec: see what keeps it busy (the reasons), then let it finish or cancel it',
  manual_review: 'flagged for manual review: look at the item, then requeue it',
  paper_human_review: 'an automated checklist item failed: review the draft',
  paper_import: 'the paper is finalized: import it into the corpus and record the import',
};

/** Sorts actionable things: by reason (ACTION_REASONS order), then the longest waiting first. */
export function byUrgency(a: { reason: ActionReason; since: string }, b: { reason: ActionReason; since: string }): number {
  const rank = ACTION_REASONS.indexOf(a.reason) - ACTION_REASONS.indexOf(b.reason);
  return rank !== 0 ? rank : a.since < b.since ? -1 : a.since > b.since ? 1 : 0;
}
