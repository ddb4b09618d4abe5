import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The process's Prometheus metrics (docs/operations.md#metrics-and-observability), served at `GET /metrics`. One registry per
 * server rather than prom-client's global one, so several servers in one process (tests) never share a series. Every
 * label value comes from a fixed set (route templates, statuses, states, outcomes): never an id.
 */

/** Values read at scrape time: queue and run counts from the store, the gate's run states and outbox. */
export type GaugeReading = { labels: Record<string, string>; value: number }[];

const SCRAPE_SOURCE_TIMEOUT_MS = 2_000;

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly httpRequestDuration = new Histogram({
    name: 'rcp_http_request_duration_seconds',
    help: 'HTTP request duration by route template, method and status code',
    labelNames: ['route', 'method', 'status_code'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly workerCallbacks = new Counter({
    name: 'rcp_worker_callbacks_total',
    help: 'Completion callbacks received from worker gates, by outcome (accepted, ignored, conflicting, refused)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly dispatchOutcomes = new Counter({
    name: 'rcp_dispatch_outcomes_total',
    help: 'Answers of POST /control/dispatch-next, by action (dry_run_dispatch, live_dispatch, dispatch_blocked, paused, noop, failed)',
    labelNames: ['action'] as const,
    registers: [this.registry],
  });
  readonly paperStepOutcomes = new Counter({
    name: 'rcp_paper_step_outcomes_total',
    help: 'Answers of the paper drafting commands (draft-next, rewrite-draft, rewrite-batch, prepare-finalization-package), by command and outcome',
    labelNames: ['command', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly liveDispatchDuration = new Histogram({
    name: 'rcp_live_dispatch_duration_seconds',
    help: 'Duration of live dispatches, from the request to the worker accepting the run or the attempt failing',
    labelNames: ['outcome'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  /** Other Prometheus texts appended to ours (the Temporal SDK runtime's exporter). */
  private readonly scrapeSources: string[] = [];

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** A gauge whose values are read when Prometheus scrapes. */
  gaugeReadAtScrape(name: string, help: string, labelNames: readonly string[], read: () => Promise<GaugeReading> | GaugeReading): void {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const { labels, value } of await read()) this.set(labels, value);
      },
    });
  }

  /** Appends another exporter's text to every scrape; one that does not answer is left out of that scrape. */
  addScrapeSource(url: string): void {
    this.scrapeSources.push(url);
  }

  async exposition(): Promise<string> {
    const own = await this.registry.metrics();
    const others = await Promise.all(
      this.scrapeSources.map(async (url) => {
        try {
          const response = await fetch(url, { signal: AbortSignal.timeout(SCRAPE_SOURCE_TIMEOUT_MS) });
          return response.ok ? await response.text() : '';
        } catch {
          return '';
        }
      }),
    );
    return [own, ...others].map((text) => (text.endsWith('\n') || text === '' ? text : `${text}\n`)).join('');
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/** Times every request by the route it matched; requests that matched none share the template `unmatched`. */
export function recordRequestDurations(app: FastifyInstance, metrics: ServiceMetrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.httpRequestDuration.observe(
      { route: request.routeOptions.url ?? 'unmatched', method: request.method, status_code: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });
}
