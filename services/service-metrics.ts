import { QUEUE_STATUSES } from '../domain/queue-status.ts';
import { RUN_STATES } from '../domain/run-state.ts';
import type { ServiceMetrics } from '../http/metrics.ts';
import { queueCounts, runCountsByState } from '../store/status-reads.ts';
import type { Store } from '../store/store.ts';

/** The control plane's ledger series (README "Metrics and observability"), counted in the store at each scrape. */
export function registerControlPlaneMetrics(metrics: ServiceMetrics, store: Store): void {
  metrics.gaugeReadAtScrape('rcp_queue_items', 'Queue rows by status', ['status'], async () => {
    const counts = await queueCounts(store);
    return QUEUE_STATUSES.map((status) => ({ labels: { status }, value: counts.by_status[status] }));
  });
  metrics.gaugeReadAtScrape('rcp_runs', 'Runs by state', ['state'], async () => {
    const counts = await runCountsByState(store);
    return RUN_STATES.map((state) => ({ labels: { state }, value: counts[state] ?? 0 }));
  });
}
