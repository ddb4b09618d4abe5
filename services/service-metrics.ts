import { FINDING_KINDS } from '../domain/queue-alerts.ts';
import { QUEUE_STATUSES } from '../domain/queue-status.ts';
import { RUN_STATES } from '../domain/run-state.ts';
import type { ServiceMetrics } from '../http/metrics.ts';
import { queueCounts, runCountsByState } from '../store/status-reads.ts';
import { queueFindings, type QueueCheckDeps } from './queue-alerts.ts';

/**
 * The control plane's ledger series (README "Metrics and observability"), read from the store at each scrape: the
 * queue and run counts, and what the queue check would find now, by kind (README "Queue alerts"). The findings are
 * read at the scrape rather than kept from the last check: the check's schedule is paused while no alert channel is
 * on, and it runs on whichever replica's worker takes the task, so a kept value would be stale or missing.
 */
export function registerControlPlaneMetrics(metrics: ServiceMetrics, deps: QueueCheckDeps): void {
  const { store } = deps;
  metrics.gaugeReadAtScrape('rcp_queue_items', 'Queue rows by status', ['status'], async () => {
    const counts = await queueCounts(store);
    return QUEUE_STATUSES.map((status) => ({ labels: { status }, value: counts.by_status[status] }));
  });
  metrics.gaugeReadAtScrape('rcp_runs', 'Runs by state', ['state'], async () => {
    const counts = await runCountsByState(store);
    return RUN_STATES.map((state) => ({ labels: { state }, value: counts[state] ?? 0 }));
  });
  metrics.gaugeReadAtScrape(
    'rcp_queue_alert_findings',
    'Findings the queue check would report now, by kind; a check reads at most 50 runs per kind and 150 held queue items',
    ['kind'],
    async () => {
      const findings = await queueFindings(deps, new Date());
      return FINDING_KINDS.map((kind) => ({ labels: { kind }, value: findings.filter((finding) => finding.kind === kind).length }));
    },
  );
}
