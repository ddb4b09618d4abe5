import { ageSec, assessDispatchSafety, ATTENTION_STATUSES, workerFreshness, type LatestObservation } from '../runs/domain/dispatch-safety.ts';
import type { WorkerTarget } from '../runs/domain/worker-lanes.ts';
import type { PreflightCheck, PreflightResult } from '../runs/domain/preflight-checks.ts';
import {
  latestCallbackAt,
  listActiveItems,
  queueCounts,
  queuedGroups,
  readFlagDetails,
  recentWorkerCallbacks,
  type QueueCounts,
} from './store/status-reads.ts';
import { paperCounts } from '../papers/paper-counts.ts';
import type { Store } from '../../platform/store/store.ts';
import { latestAlertChecks } from '../automation/alert-ledger.ts';
import { latestWorkerObservations } from '../runs/worker-observations.ts';
import type { DispatchSettings } from '../runs/dispatch-settings.ts';
import { dispatchPreflight } from '../runs/worker-preflight.ts';

/**
 * The dispatch-safety snapshot (`GET /control/api/status`) and queue health (`GET /control/api/queue-health`). Both
 * only read, apart from the observations a refresh_worker preflight caches. Worker tokens never appear.
 */

export interface StatusDeps {
  store: Store;
  settings: DispatchSettings;
}

export interface RefreshOptions {
  /** Preflight every configured worker first, instead of reporting the latest stored observation. */
  refresh_worker: boolean;
}

const RECENT_CALLBACKS = 20;
const RECENT_ALERT_CHECKS = 5;

interface WorkerView extends LatestObservation {
  summary: string;
  checks: PreflightCheck[];
}

/** The dispatch preflight of every configured target, in parallel: would a live dispatch to it pass? */
async function refreshWorkers(deps: StatusDeps, targets: readonly WorkerTarget[]): Promise<PreflightResult[]> {
  return Promise.all(targets.map((target) => dispatchPreflight(deps, target)));
}

/**
 * The newest observation of each target. A read-only store does not cache a refresh, so the refreshed results stand
 * in for the stored ones there; on a writable store they were stored before this read.
 */
async function latestObservations(deps: StatusDeps, refreshed: readonly PreflightResult[], refreshedAt: Date): Promise<WorkerView[]> {
  const stored: WorkerView[] = (await latestWorkerObservations(deps.store)).map((observation) => ({
    target: observation.target,
    ok: observation.ok,
    observed_at: observation.observed_at,
    summary: observation.summary,
    checks: observation.checks,
  }));
  if (!deps.store.readOnly || refreshed.length === 0) return stored;
  const fresh = refreshed.map((result): WorkerView => ({ ...result, observed_at: refreshedAt.toISOString() }));
  const freshTargets = new Set(fresh.map((view) => view.target));
  return [...stored.filter((view) => !freshTargets.has(view.target)), ...fresh];
}

function attentionOf(counts: QueueCounts) {
  const isAttention = (status: string) => (ATTENTION_STATUSES as readonly string[]).includes(status);
  return {
    by_status: Object.fromEntries(ATTENTION_STATUSES.map((status) => [status, counts.by_status[status]])),
    flagged_elsewhere: Object.entries(counts.flagged_by_status)
      .filter(([status]) => !isAttention(status))
      .reduce((sum, [, flagged]) => sum + (flagged ?? 0), 0),
  };
}

export async function statusSnapshot(deps: StatusDeps, query: RefreshOptions) {
  const routing = deps.settings.routing;
  const targets = [...routing.targets.values()];
  const refreshed = query.refresh_worker ? await refreshWorkers(deps, targets) : [];
  const refreshedAt = new Date();
  const [flags, counts, papers, active, groups, observations, callbacksAt] = await Promise.all([
    readFlagDetails(deps.store),
    queueCounts(deps.store),
    paperCounts(deps.store),
    listActiveItems(deps.store),
    queuedGroups(deps.store),
    latestObservations(deps, refreshed, refreshedAt),
    latestCallbackAt(deps.store),
  ]);
  const now = new Date();
  const safety = assessDispatchSafety({
    now,
    liveDispatchEnabled: deps.settings.liveDispatchEnabled,
    flags,
    routing,
    observations,
    attention: attentionOf(counts),
    activeItems: active.map((item) => ({ ...item, run: item.run && { run_id: item.run.run_id, state: item.run.state } })),
    queuedGroups: groups,
  });
  const recordSource = (source: string, at: string | null) => ({
    source,
    observed_at: at,
    age_sec: at === null ? null : ageSec(at, now),
    // Staleness is about sampled workers; the queue and the callback ledger are records, current by definition.
    stale: false,
    ok: null,
  });
  return {
    dispatch_safe: safety.dispatch_safe,
    dispatch_blockers: safety.dispatch_blockers,
    flags: { queue_paused: flags.queue_paused, maintenance_mode: flags.maintenance_mode },
    live_dispatch_enabled: deps.settings.liveDispatchEnabled,
    counts: { ...counts.by_status, papers: papers.total, paper_pipeline: papers.pipeline, queue_total: counts.total },
    active_items: active.map(({ run, last_callback: _lastCallback, ...item }) => ({ ...item, run_state: run?.state ?? null })),
    source_freshness: [
      ...safety.worker_freshness.map(({ target: _target, ...entry }) => entry),
      recordSource('queue', counts.latest_update),
      recordSource('worker_callbacks', callbacksAt),
    ],
    warnings: safety.warnings,
    conflicts: safety.conflicts,
    generated_at: now.toISOString(),
    ...(query.refresh_worker ? { refreshed } : {}),
  };
}

/** Which alert channels are on (capabilities/automation/queue-alerts.ts AlertSettings, seen from here). */
export interface AlertChannelsOn {
  push: object | null;
  webhook: object | null;
}

export async function queueHealth(deps: StatusDeps & { alerts: AlertChannelsOn }, query: RefreshOptions) {
  const targets = [...deps.settings.routing.targets.values()];
  const refreshed = query.refresh_worker ? await refreshWorkers(deps, targets) : [];
  const refreshedAt = new Date();
  const [observations, active, callbacks, checks] = await Promise.all([
    latestObservations(deps, refreshed, refreshedAt),
    listActiveItems(deps.store),
    recentWorkerCallbacks(deps.store, RECENT_CALLBACKS),
    latestAlertChecks(deps.store, RECENT_ALERT_CHECKS),
  ]);
  const now = new Date();
  const byTarget = new Map(observations.map((view) => [view.target, view]));
  const freshness = workerFreshness(targets, observations, now);
  return {
    workers: targets.map((target, index) => {
      const view = byTarget.get(target.name);
      return {
        name: target.name,
        wake_gate_url: target.wake_gate_url,
        role: target.role,
        observation: view ? { observed_at: view.observed_at, ok: view.ok, summary: view.summary, checks: view.checks } : null,
        age_sec: freshness[index]?.age_sec ?? null,
        fresh: !(freshness[index]?.stale ?? true),
      };
    }),
    active_runs: active.map((item) => ({
      project_id: item.project_id,
      status: item.status,
      run_id: item.current_run_id,
      state: item.run?.state ?? null,
      lane: item.lane,
      started: item.run?.created_at ?? null,
      age_sec: item.run ? ageSec(item.run.created_at, now) : null,
      last_callback_event: item.last_callback?.event_type ?? null,
      last_callback_at: item.last_callback?.received_at ?? null,
    })),
    alerts: {
      enabled: deps.alerts.push !== null || deps.alerts.webhook !== null,
      channels: { push: deps.alerts.push !== null, webhook: deps.alerts.webhook !== null },
      // The latest live checks, newest first, each with its findings and what each channel answered.
      results: checks,
    },
    recent_callbacks: callbacks,
    generated_at: now.toISOString(),
    ...(query.refresh_worker ? { refreshed } : {}),
  };
}
