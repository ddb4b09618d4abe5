import {
  ACTION_HINTS,
  byUrgency,
  operatorLaneCounts,
  queueItemAction,
  queueItemLane,
  type ActionReason,
} from './domain/operator-lanes.ts';
import { PAPER_STATUSES, REVIEW_STATUSES, type PaperStatus, type ReviewStatus } from '../papers/domain/paper-status.ts';
import { QUEUE_STATUSES, queueGroupCounts, type QueueStatus } from '../runs/domain/queue-status.ts';
import { listAuditEventsBefore } from '../../platform/store/audit-events.ts';
import {
  activeQueueItems,
  attentionQueueItems,
  paperStatusGroups,
  papersAwaitingImport,
  papersNeedingReview,
  queueFactGroups,
  type OverviewPaper,
  type OverviewQueueItem,
} from './overview-reads.ts';
import { paperCounts } from '../papers/paper-counts.ts';
import { runCountsByState } from './store/status-reads.ts';
import type { Queryable } from '../../platform/store/store.ts';
import type { DispatchSettings } from '../runs/dispatch-settings.ts';
import { quietWindowsOf } from '../runs/run-gate-view.ts';

/** `GET /control/api/v1/overview` (docs/console.md#read-models): lane counts, their drill-down, and what needs a person. */

/**
 * The overview, with the runs in flight whose gate has waited on their quiet window far longer than idle_sustain_sec
 * among what needs a person (their gates are asked at once; a gate that does not answer leaves its runs out).
 */
export async function readOverviewWithWaits(q: Queryable, dispatch: DispatchSettings, limits: OverviewLimits) {
  const overview = await readOverview(q, limits);
  const inFlight = overview.active_items.flatMap((item) => (item.current_run_id && item.lane ? [{ run_id: item.current_run_id, lane: item.lane }] : []));
  if (inFlight.length === 0) return overview;
  const windows = await quietWindowsOf({ dispatch }, inFlight);
  const waiting: ActionableItem[] = overview.active_items.flatMap((item) => {
    const window = item.current_run_id ? windows.get(item.current_run_id) : undefined;
    if (!window?.overdue) return [];
    const why = window.reasons.length > 0 ? ` (${window.reasons.join('; ')})` : '';
    const hint = `waiting ${Math.round((window.waiting_sec ?? 0) / 60)} min on its quiet window${why}: ${ACTION_HINTS.quiet_window_overdue}`;
    return [{ kind: 'queue_item' as const, reason: 'quiet_window_overdue' as const, hint, since: window.idle_seen_at ?? item.updated_at, ...item }];
  });
  if (waiting.length === 0) return overview;
  return { ...overview, actionable_items: [...overview.actionable_items, ...waiting].sort(byUrgency).slice(0, limits.active_limit) };
}

export interface OverviewLimits {
  /** Most actionable and most active items listed. */
  active_limit: number;
  /** Most recent audit events listed. */
  event_limit: number;
}

export type ActionableItem =
  | ({ kind: 'queue_item'; reason: ActionReason; hint: string; since: string } & OverviewQueueItem)
  | ({ kind: 'paper'; reason: ActionReason; hint: string; since: string } & OverviewPaper);

const zeroed = <K extends string>(keys: readonly K[]) => Object.fromEntries(keys.map((key) => [key, 0])) as Record<K, number>;

function actionableItems(attention: OverviewQueueItem[], review: OverviewPaper[], awaitingImport: OverviewPaper[], limit: number): ActionableItem[] {
  const items: ActionableItem[] = [];
  for (const item of attention) {
    const reason = queueItemAction(item);
    if (reason) items.push({ kind: 'queue_item', reason, hint: ACTION_HINTS[reason], since: item.updated_at, ...item });
  }
  for (const paper of review) items.push({ kind: 'paper', reason: 'paper_human_review', hint: ACTION_HINTS.paper_human_review, since: paper.updated_at, ...paper });
  for (const paper of awaitingImport) items.push({ kind: 'paper', reason: 'paper_import', hint: ACTION_HINTS.paper_import, since: paper.updated_at, ...paper });
  return items.sort(byUrgency).slice(0, limit);
}

export async function readOverview(q: Queryable, limits: OverviewLimits) {
  const [queueGroups, paperGroups, pipeline, runsByState, attention, review, awaitingImport, active, events] = await Promise.all([
    queueFactGroups(q),
    paperStatusGroups(q),
    paperCounts(q),
    runCountsByState(q),
    attentionQueueItems(q, limits.active_limit),
    papersNeedingReview(q, limits.active_limit),
    papersAwaitingImport(q, limits.active_limit),
    activeQueueItems(q, limits.active_limit),
    listAuditEventsBefore(q, {}, { limit: limits.event_limit }),
  ]);

  const queueByStatus = zeroed<QueueStatus>(QUEUE_STATUSES);
  const attentionDetail = { agent_question: 0, dispatch_error: 0, blocked: 0, manual_review: 0, paper_human_review: 0 };
  const runningDetail: Partial<Record<QueueStatus, number>> = {};
  let flagged = 0;
  for (const group of queueGroups) {
    queueByStatus[group.status] += group.n;
    if (group.manual_review_required) flagged += group.n;
    const lane = queueItemLane(group);
    if (lane === 'attention') attentionDetail[queueItemAction(group) as keyof typeof attentionDetail] += group.n;
    if (lane === 'running') runningDetail[group.status] = (runningDetail[group.status] ?? 0) + group.n;
  }
  const papersByStatus = zeroed<PaperStatus>(PAPER_STATUSES);
  const reviewsByStatus = zeroed<ReviewStatus>(REVIEW_STATUSES);
  for (const group of paperGroups) {
    papersByStatus[group.paper_status] += group.n;
    reviewsByStatus[group.review_status] += group.n;
  }
  attentionDetail.paper_human_review = papersByStatus.human_review_required;

  return {
    operator_counts: operatorLaneCounts(queueGroups, papersByStatus, pipeline.pipeline),
    operator_detail_counts: {
      attention: attentionDetail,
      running: runningDetail,
      queue: { by_status: queueByStatus, by_group: queueGroupCounts(queueGroups), manual_review_required: flagged },
      runs: { by_state: runsByState },
      papers: { total: pipeline.total, by_paper_status: papersByStatus, by_review_status: reviewsByStatus },
    },
    paper_pipeline: pipeline.pipeline,
    actionable_items: actionableItems(attention, review, awaitingImport, limits.active_limit),
    active_items: active,
    recent_events: events,
    links: {
      observability_health: '/control/api/v1/observability/health',
      observability_memory: '/control/api/v1/observability/memory',
    },
  };
}
