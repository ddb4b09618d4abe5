import { FINDING_KINDS } from '../automation/domain/alert-findings.ts';
import { QUEUE_STATUSES } from '../runs/domain/queue-status.ts';
import { RUN_STATES } from '../runs/domain/run-state.ts';
import type { ServiceMetrics } from '../../platform/http/metrics.ts';
import { queueCounts, runCountsByState } from './store/status-reads.ts';
import { queueFindings, type QueueCheckDeps } from '../automation/queue-alerts.ts';
import { readLaneHoldings } from '../runs/lanes.ts';
import { queueLastMovedAt } from '../runs/run-reads.ts';

/**
 * The control plane's ledger series (docs/operations.md#metrics-and-observability), read from the store at each scrape: the
 * queue and run counts, and what the queue check would find now, by kind (docs/automation.md#queue-alerts). The findings are
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
    'rcp_queue_last_moved_timestamp_seconds',
    'When the queue last moved, Unix seconds: a run started or ended (before any run, when the oldest queued item was queued); 0 while nothing waited yet',
    [],
    async () => {
      const movedAt = await queueLastMovedAt(store);
      return [{ labels: {}, value: movedAt === null ? 0 : Date.parse(movedAt) / 1000 }];
    },
  );
  registerLaneMetrics(metrics, deps);
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

/**
 * One series per configured lane (each slot of each target, docs/runs.md#slots-and-gpus), 0 while it is free: whether a
 * run holds it, for how long, the runtime its candidate expected, and how many GPUs it holds. Run ids stay out of the
 * labels (the lanes read model names them), so the series do not multiply with every run.
 */
function registerLaneMetrics(metrics: ServiceMetrics, deps: QueueCheckDeps): void {
  const labelNames = ['target', 'lane'];
  const perLane = async (value: (holding: Awaited<ReturnType<typeof readLaneHoldings>>[number]) => number) => {
    const holdings = new Map((await readLaneHoldings(deps.store)).map((holding) => [holding.lane, holding]));
    return [...deps.dispatch.routing.lanes.values()].map(({ name, lane }) => {
      const holding = holdings.get(lane);
      return { labels: { target: name, lane }, value: holding ? value(holding) : 0 };
    });
  };
  metrics.gaugeReadAtScrape('rcp_lane_held', 'Whether a run holds the lane (a slot of a worker target): 1 or 0', labelNames, () => perLane(() => 1));
  metrics.gaugeReadAtScrape('rcp_lane_held_seconds', 'Seconds the run holding the lane has held it; 0 while it is free', labelNames, () =>
    perLane((holding) => holding.held_sec),
  );
  metrics.gaugeReadAtScrape(
    'rcp_lane_expected_runtime_seconds',
    "Runtime the lane's run was expected to take, from its candidate's estimated_runtime_class (a day without one); 0 while the lane is free",
    labelNames,
    () => perLane((holding) => holding.expected_sec),
  );
  metrics.gaugeReadAtScrape('rcp_lane_gpus', "GPUs the lane's run holds; 0 while the lane is free or its run holds none", labelNames, () =>
    perLane((holding) => holding.gpu_count),
  );
}

/** One Temporal Schedule's latest completed tick, as the schedules client reads it. */
export interface ScheduleTickReading {
  schedule: string;
  lastCompletedAt: Date;
}

/** A scrape waits this long for Temporal's answer about the schedules, then serves the last answer it gave. */
const SCHEDULE_READ_TIMEOUT_MS = 2_000;

/**
 * Each schedule's interval, and the age of each unpaused schedule's latest completed tick, so an alert rule can tell a
 * pump whose ticks keep failing or never end (docs/automation.md#queue-pump) from one that is merely between ticks. The ages
 * are read from Temporal at each scrape; a paused schedule has none. On a busy machine Temporal can take longer than a
 * scrape should wait: that scrape serves the completion times of the last answer, their ages still growing, and the
 * read it left running is the one the next scrape waits on, so a slow Temporal never has more than one read in flight.
 */
export function registerScheduleMetrics(
  metrics: ServiceMetrics,
  taskQueue: string,
  schedules: { schedule: string; intervalSec: number }[],
  readTicks: () => Promise<ScheduleTickReading[]>,
): void {
  const labelNames = ['schedule', 'task_queue'];
  let lastAnswer: ScheduleTickReading[] = [];
  let readInFlight: Promise<void> | undefined;
  metrics.gaugeReadAtScrape('rcp_schedule_interval_seconds', 'Seconds between ticks of a Temporal Schedule (queue_pump, queue_check)', labelNames, () =>
    schedules.map(({ schedule, intervalSec }) => ({ labels: { schedule, task_queue: taskQueue }, value: intervalSec })),
  );
  metrics.gaugeReadAtScrape(
    'rcp_schedule_last_completed_tick_age_seconds',
    'Seconds since a tick of a Temporal Schedule last completed; no series while the schedule is paused',
    labelNames,
    async () => {
      readInFlight ??= readTicks()
        .then((ticks) => {
          lastAnswer = ticks;
        })
        .catch(() => undefined)
        .finally(() => {
          readInFlight = undefined;
        });
      await withTimeout(readInFlight, SCHEDULE_READ_TIMEOUT_MS).catch(() => undefined);
      return lastAnswer.map(({ schedule, lastCompletedAt }) => ({ labels: { schedule, task_queue: taskQueue }, value: Math.max(0, (Date.now() - lastCompletedAt.getTime()) / 1000) }));
    },
  );
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
