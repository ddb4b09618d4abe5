import { GATE_STATES } from './contract/gate-names.ts';
import type { ServiceMetrics } from '../platform/http/metrics.ts';
import type { WorkerGate } from './worker-gate.ts';

/**
 * The gate's series (docs/operations.md#metrics-and-observability), read at each scrape: its runs by quiet-window state, what
 * sampling has cost, its run slots and how many are held, and the callbacks waiting in the outbox.
 */
export function registerGateMetrics(metrics: ServiceMetrics, gate: WorkerGate): void {
  metrics.gaugeReadAtScrape('rcp_gate_runs', 'Runs the worker gate holds, by gate state (the quiet-window lifecycle)', ['gate_state'], () => {
    const { runsByGateState } = gate.metricsReadings();
    return GATE_STATES.map((state) => ({ labels: { gate_state: state }, value: runsByGateState[state] ?? 0 }));
  });
  metrics.gaugeReadAtScrape('rcp_gate_samples', 'Telemetry samples the gate has taken since start-up', [], () => [
    { labels: {}, value: gate.metricsReadings().samples },
  ]);
  metrics.gaugeReadAtScrape('rcp_gate_sampling_cpu_seconds', 'CPU time the gate has spent sampling and evaluating since start-up', [], () => [
    { labels: {}, value: gate.metricsReadings().samplingCpuMs / 1000 },
  ]);
  metrics.gaugeReadAtScrape('rcp_gate_run_slots', 'Runs the worker gate holds at once (run_slots)', [], () => [
    { labels: {}, value: gate.metricsReadings().runSlots },
  ]);
  metrics.gaugeReadAtScrape('rcp_gate_run_slots_held', 'Slots of the worker gate held by runs that have not settled', [], () => [
    { labels: {}, value: gate.metricsReadings().runSlotsHeld },
  ]);
  metrics.gaugeReadAtScrape('rcp_gate_outbox_pending', 'Completion callbacks waiting in the gate\'s outbox', [], () => [
    { labels: {}, value: gate.metricsReadings().outboxPending },
  ]);
}
