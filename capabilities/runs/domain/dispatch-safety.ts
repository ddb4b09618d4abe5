import { resolveLane, type WorkerRouting, type WorkerTarget } from './worker-lanes.ts';
import type { QueueStatus } from './queue-status.ts';
import { isRunFinished, type RunState } from './run-state.ts';
import type { WorkloadClass } from '../../../worker-gate/contract/workload.ts';

/**
 * The dispatch-safety verdict of the status snapshot (`GET /control/api/status`): blockers that stop a
 * dispatch, conflicts between the queue and the run ledger, and warnings an operator should look at. Pure: the
 * caller reads the database and the clock; this module only decides.
 */

/** A worker observation older than this (or none at all) is stale. */
export const WORKER_STALE_AFTER_SEC = 15 * 60;

/** Statuses an operator has to act on before the item moves again. */
export const ATTENTION_STATUSES = ['blocked', 'needs_review', 'dispatch_error'] as const satisfies readonly QueueStatus[];

/** At most this many project ids are named in one grouped finding. */
const SAMPLE_IDS = 5;

export type FindingSeverity = 'info' | 'warning' | 'critical';

export interface Finding {
  severity: FindingSeverity;
  /** What the finding is about: `queue`, `worker:<name>`, `run:<run_id>`, `queue_item:<project_id>`. */
  source: string;
  message: string;
  suggested_action: string;
}

export interface ObservedCheck {
  name: string;
  ok: boolean;
}

/** The latest cached preflight of one worker target. */
export interface LatestObservation {
  target: string;
  ok: boolean;
  observed_at: string;
  checks: readonly ObservedCheck[];
}

export interface PauseState {
  queue_paused: boolean;
  maintenance_mode: boolean;
  paused_by: string | null;
  /** The reason given with the latest pause command, if any. */
  pause_reason: string | null;
  maintenance_by: string | null;
}

export interface ActiveItemInput {
  project_id: string;
  status: QueueStatus;
  lane: string | null;
  current_run_id: string | null;
  /** The run row of current_run_id; null when there is no current run or its row is missing. */
  run: { run_id: string; state: RunState } | null;
}

/** Queued rows grouped by what decides their lane and eligibility. */
export interface QueuedGroup {
  machine_target: string | null;
  workload_class: WorkloadClass;
  manual_review_required: boolean;
  count: number;
  /** A few project ids of the group, in project_id order. */
  sample_project_ids: readonly string[];
}

export interface DispatchSafetyInput {
  now: Date;
  liveDispatchEnabled: boolean;
  flags: PauseState;
  routing: WorkerRouting;
  observations: readonly LatestObservation[];
  /**
   * The `blocked` group (docs/queue.md#the-queue): rows in an ATTENTION_STATUSES status, counted by status, plus rows in any
   * other status that are flagged manual_review_required.
   */
  attention: { by_status: Readonly<Partial<Record<QueueStatus, number>>>; flagged_elsewhere: number };
  activeItems: readonly ActiveItemInput[];
  queuedGroups: readonly QueuedGroup[];
}

export interface WorkerFreshness {
  source: string;
  target: string;
  observed_at: string | null;
  age_sec: number | null;
  stale: boolean;
  ok: boolean | null;
}

export interface DispatchSafety {
  dispatch_safe: boolean;
  dispatch_blockers: string[];
  warnings: Finding[];
  conflicts: Finding[];
  /** One entry per configured worker target, in configuration order. */
  worker_freshness: WorkerFreshness[];
  /** Queued rows that a dispatch could pick right now, flags and switches aside. */
  dispatchable_count: number;
}

export const ageSec = (from: string, now: Date): number => Math.max(0, Math.round((now.getTime() - Date.parse(from)) / 1000));

export function workerFreshness(
  targets: readonly WorkerTarget[],
  observations: readonly LatestObservation[],
  now: Date,
): WorkerFreshness[] {
  const byTarget = new Map(observations.map((observation) => [observation.target, observation]));
  return targets.map((target) => {
    const latest = byTarget.get(target.name);
    const age = latest ? ageSec(latest.observed_at, now) : null;
    return {
      source: `worker:${target.name}`,
      target: target.name,
      observed_at: latest?.observed_at ?? null,
      age_sec: age,
      stale: age === null || age > WORKER_STALE_AFTER_SEC,
      ok: latest?.ok ?? null,
    };
  });
}

const sample = (ids: readonly string[], count: number): string =>
  ids.slice(0, SAMPLE_IDS).join(', ') + (count > Math.min(ids.length, SAMPLE_IDS) ? ', …' : '');

const REFRESH_ACTION = 'run a fresh preflight: GET /control/api/status?refresh_worker=true';

function pauseBlockers(flags: PauseState, liveDispatchEnabled: boolean): string[] {
  const blockers: string[] = [];
  if (!liveDispatchEnabled) blockers.push('live dispatch is disabled (live_dispatch_enabled is false)');
  if (flags.queue_paused) {
    const by = flags.paused_by ? ` by ${flags.paused_by}` : '';
    blockers.push(`queue is paused${by}${flags.pause_reason ? `: ${flags.pause_reason}` : ''}`);
  }
  if (flags.maintenance_mode) {
    blockers.push(`maintenance mode is on${flags.maintenance_by ? ` (set by ${flags.maintenance_by})` : ''}`);
  }
  return blockers;
}

function workerFindings(
  targets: readonly WorkerTarget[],
  observations: readonly LatestObservation[],
  freshness: readonly WorkerFreshness[],
): { blockers: string[]; warnings: Finding[] } {
  if (targets.length === 0) {
    return { blockers: ['no worker target is configured (set worker_wake_gate_url or worker_targets)'], warnings: [] };
  }
  const byTarget = new Map(observations.map((observation) => [observation.target, observation]));
  const blockers: string[] = [];
  const warnings: Finding[] = [];
  for (const entry of freshness) {
    const latest = byTarget.get(entry.target);
    if (latest && !latest.ok) {
      const failing = latest.checks.filter((check) => !check.ok).map((check) => check.name);
      blockers.push(
        `worker '${entry.target}' failed its latest preflight (${latest.observed_at})` +
          (failing.length > 0 ? `: ${failing.join(', ')}` : ''),
      );
    }
    if (!entry.stale) continue;
    warnings.push({
      severity: 'warning',
      source: entry.source,
      message:
        entry.age_sec === null
          ? `worker '${entry.target}' has never been observed`
          : `worker '${entry.target}' was last observed ${entry.age_sec} s ago (stale after ${WORKER_STALE_AFTER_SEC} s)`,
      suggested_action: REFRESH_ACTION,
    });
  }
  return { blockers, warnings };
}

function activeItemConflicts(items: readonly ActiveItemInput[]): Finding[] {
  return items.flatMap((item): Finding[] => {
    const source = `queue_item:${item.project_id}`;
    if (item.current_run_id === null) {
      return [{
        severity: 'critical',
        source,
        message: `project '${item.project_id}' is ${item.status} but has no current run`,
        suggested_action: `no run owns lane '${item.lane ?? '?'}': move the row out of ${item.status} by hand (for example to blocked), then POST /control/queue/requeue`,
      }];
    }
    if (item.run === null) {
      return [{
        severity: 'critical',
        source,
        message: `project '${item.project_id}' is ${item.status} for run '${item.current_run_id}', which has no run record`,
        suggested_action: `cancel the run (POST /control/api/runs/${item.current_run_id}/cancel), then POST /control/queue/requeue`,
      }];
    }
    if (isRunFinished(item.run.state)) {
      return [{
        severity: 'critical',
        source: `run:${item.run.run_id}`,
        message: `project '${item.project_id}' is still ${item.status} but its run '${item.run.run_id}' finished as ${item.run.state}`,
        suggested_action: `cancel the run (POST /control/api/runs/${item.run.run_id}/cancel) to release the lane, then POST /control/queue/requeue`,
      }];
    }
    return [];
  });
}

interface LaneVerdict {
  conflicts: Finding[];
  dispatchable: number;
  queued: number;
}

/** Queued rows whose lane cannot be resolved (grouped by reason), and how many rows could be dispatched now. */
function laneVerdict(groups: readonly QueuedGroup[], routing: WorkerRouting, busyLanes: ReadonlySet<string>): LaneVerdict {
  const unresolved = new Map<string, { count: number; ids: string[] }>();
  let dispatchable = 0;
  let queued = 0;
  for (const group of groups) {
    queued += group.count;
    const lane = resolveLane(group, routing);
    if (!lane.ok) {
      const entry = unresolved.get(lane.reason) ?? { count: 0, ids: [] };
      entry.count += group.count;
      entry.ids.push(...group.sample_project_ids);
      unresolved.set(lane.reason, entry);
      continue;
    }
    if (!group.manual_review_required && !busyLanes.has(lane.target.name)) dispatchable += group.count;
  }
  const conflicts = [...unresolved].map(([reason, entry]): Finding => {
    const ids = [...entry.ids].sort();
    return {
      severity: 'warning',
      source: 'queue',
      message: `${entry.count} queued item${entry.count === 1 ? ' has' : 's have'} no lane: ${reason} (${sample(ids, entry.count)})`,
      suggested_action: 'configure the worker target, or change the item machine_target / workload_class; POST /control/queue/mark-paused keeps it aside meanwhile',
    };
  });
  return { conflicts, dispatchable, queued };
}

function queueWarnings(attention: DispatchSafetyInput['attention'], lanes: LaneVerdict): Finding[] {
  const warnings: Finding[] = [];
  const parts = Object.entries(attention.by_status).filter((entry): entry is [string, number] => (entry[1] ?? 0) > 0);
  if (attention.flagged_elsewhere > 0) parts.push(['manual_review_required', attention.flagged_elsewhere]);
  const total = parts.reduce((sum, [, count]) => sum + count, 0);
  if (total > 0) {
    warnings.push({
      severity: 'warning',
      source: 'queue',
      message: `${total} queue item${total === 1 ? ' needs' : 's need'} attention (${parts.map(([name, count]) => `${name} ${count}`).join(', ')})`,
      suggested_action: 'review them in GET /control/api/queues/blocked, then POST /control/queue/requeue or /control/queue/mark-paused',
    });
  }
  if (lanes.queued > 0 && lanes.dispatchable === 0) {
    warnings.push({
      severity: 'warning',
      source: 'queue',
      message: `${lanes.queued} queued item${lanes.queued === 1 ? '' : 's'} but none is dispatchable (flagged for review, no lane, or lane busy)`,
      suggested_action: 'clear review flags with POST /control/queue/requeue, fix lane routing, or wait for the active runs to finish',
    });
  }
  return warnings;
}

export function assessDispatchSafety(input: DispatchSafetyInput): DispatchSafety {
  const targets = [...input.routing.targets.values()];
  const freshness = workerFreshness(targets, input.observations, input.now);
  const workers = workerFindings(targets, input.observations, freshness);
  const busyLanes = new Set(input.activeItems.flatMap((item) => (item.lane === null ? [] : [item.lane])));
  const lanes = laneVerdict(input.queuedGroups, input.routing, busyLanes);

  const blockers = [...pauseBlockers(input.flags, input.liveDispatchEnabled), ...workers.blockers];
  const conflicts = [...activeItemConflicts(input.activeItems), ...lanes.conflicts];
  const warnings = [...workers.warnings, ...queueWarnings(input.attention, lanes)];
  return {
    dispatch_safe: blockers.length === 0 && !conflicts.some((finding) => finding.severity === 'critical'),
    dispatch_blockers: blockers,
    warnings,
    conflicts,
    worker_freshness: freshness,
    dispatchable_count: lanes.dispatchable,
  };
}
