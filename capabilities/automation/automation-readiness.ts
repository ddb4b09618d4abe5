import { assessReadiness, type ReadinessInput } from './domain/readiness-rules.ts';
import { WORKER_STALE_AFTER_SEC } from '../runs/domain/dispatch-safety.ts';
import { queueItemLane } from '../console/domain/operator-lanes.ts';
import { queueFactGroups } from '../console/overview-reads.ts';
import type { DispatchSettings } from '../runs/dispatch-settings.ts';
import { statusSnapshot, type RefreshOptions } from '../console/status.ts';
import type { Store } from '../../platform/store/store.ts';
import { providerBudget, type ProviderBatchSettings } from '../research/provider-batch.ts';

export interface ReadinessDeps {
  store: Store;
  settings: DispatchSettings;
  /** The Temporal connection's health; absent where the process has none (then Temporal is not ready). */
  temporalHealth?: () => Promise<{ ok: boolean; error?: string }>;
  /** The research provider; its budget is judged when one is configured. */
  researchProvider: ProviderBatchSettings;
}

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

async function temporalCriterion(deps: ReadinessDeps): Promise<ReadinessInput['temporal']> {
  if (!deps.temporalHealth) return { ok: false, detail: 'this process has no Temporal connection' };
  try {
    const health = await deps.temporalHealth();
    return health.ok ? { ok: true, detail: 'Temporal answers and the worker is running' } : { ok: false, detail: `Temporal is not ready: ${health.error ?? 'unhealthy'}` };
  } catch (error) {
    return { ok: false, detail: `Temporal is not reachable: ${errorText(error)}` };
  }
}

/**
 * `GET /control/api/v1/automation-readiness`: the dispatch-safety snapshot (with a fresh preflight when asked),
 * Temporal's health and the queue's attention items, judged by capabilities/automation/domain/readiness-rules.ts.
 */
export async function readAutomationReadiness(deps: ReadinessDeps, query: RefreshOptions) {
  const checkedAt = new Date().toISOString();
  const temporal = await temporalCriterion(deps);
  let storeError: string | null = null;
  try {
    await deps.store.ping();
  } catch (error) {
    storeError = errorText(error);
  }
  if (storeError !== null) {
    const blank = { temporal, workerProblems: [], queuePaused: false, maintenanceMode: false, criticalConflicts: [], liveDispatchEnabled: false, attentionItems: 0, providerBudget: null };
    return { ...assessReadiness({ storeError, ...blank }), checked_at: checkedAt };
  }

  const [snapshot, groups, budget] = await Promise.all([
    statusSnapshot(deps, query),
    queueFactGroups(deps.store),
    deps.researchProvider.provider ? providerBudget({ store: deps.store, settings: deps.researchProvider }) : null,
  ]);
  const workerProblems: string[] = deps.settings.routing.targets.size === 0 ? ['no worker target is configured (set worker_wake_gate_url or worker_targets)'] : [];
  for (const entry of snapshot.source_freshness.filter((source) => source.source.startsWith('worker:'))) {
    const name = entry.source.slice('worker:'.length);
    if (entry.observed_at === null) workerProblems.push(`worker '${name}' has never been observed (refresh_worker=true runs a preflight)`);
    else if (entry.stale) workerProblems.push(`worker '${name}' was last observed ${entry.age_sec} s ago (stale after ${WORKER_STALE_AFTER_SEC} s)`);
    else if (entry.ok === false) workerProblems.push(`worker '${name}' failed its latest preflight`);
  }
  const attentionItems = groups.filter((group) => queueItemLane(group) === 'attention').reduce((sum, group) => sum + group.n, 0);
  const readiness = assessReadiness({
    storeError,
    temporal,
    workerProblems,
    queuePaused: snapshot.flags.queue_paused,
    maintenanceMode: snapshot.flags.maintenance_mode,
    criticalConflicts: snapshot.conflicts.filter((finding) => finding.severity === 'critical').map((finding) => finding.message),
    liveDispatchEnabled: snapshot.live_dispatch_enabled,
    attentionItems,
    providerBudget: budget,
  });
  return { ...readiness, checked_at: checkedAt };
}
