import { appendFileSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';

/**
 * Route observability (docs/operations.md#metrics-and-observability): one JSON line per request with its route template,
 * status, duration and the process's RSS, appended to a log that is rotated by size, and a warning for a request
 * slower than `slowMs` or finishing with RSS above `memoryWarnRssMib`.
 */

export interface RouteObservabilityOptions {
  path: string;
  slowMs: number;
  /** 0: no RSS warning. */
  memoryWarnRssMib: number;
  /** The log is renamed to `<path>.1` (the previous `.1` is dropped) once it passes this size. */
  rotateAtBytes?: number;
}

export const ROUTE_LOG_ROTATE_AT_BYTES = 10 * 1024 * 1024;
/** A process that stays above the RSS level would otherwise warn on every request. */
const MEMORY_WARNING_EVERY_MS = 60_000;
const MIB = 1024 * 1024;

export interface RouteObservabilityHealth {
  enabled: true;
  log_path: string;
  slow_ms: number;
  memory_warn_rss_mib: number;
  requests: number;
  slow_requests: number;
  memory_warnings: number;
  last_slow_request: { at: string; route: string; method: string; status: number; duration_ms: number } | null;
  /** The last error writing the log (a full disk, a removed directory); requests are never failed for it. */
  last_write_error: string | null;
  started_at: string;
}

/** Bytes in MiB, to one decimal. */
export const mib = (bytes: number) => Math.round((bytes / MIB) * 10) / 10;

export const rssMib = () => mib(process.memoryUsage.rss());

export class RouteObservability {
  readonly options: RouteObservabilityOptions;
  private readonly rotateAtBytes: number;
  private readonly stats: Omit<RouteObservabilityHealth, 'enabled' | 'log_path' | 'slow_ms' | 'memory_warn_rss_mib'> = {
    requests: 0,
    slow_requests: 0,
    memory_warnings: 0,
    last_slow_request: null,
    last_write_error: null,
    started_at: new Date().toISOString(),
  };
  private bytesWritten: number | undefined;
  private lastMemoryWarningAt = -Infinity;

  constructor(options: RouteObservabilityOptions) {
    this.options = options;
    this.rotateAtBytes = options.rotateAtBytes ?? ROUTE_LOG_ROTATE_AT_BYTES;
  }

  /** Records one finished request; never throws. */
  record(request: { route: string; method: string; status: number; durationMs: number }, log: FastifyBaseLogger): void {
    const at = new Date().toISOString();
    const rss = rssMib();
    const durationMs = Math.round(request.durationMs * 10) / 10;
    this.stats.requests += 1;
    const slow = durationMs > this.options.slowMs;
    const overMemory = this.options.memoryWarnRssMib > 0 && rss > this.options.memoryWarnRssMib;
    if (slow) {
      this.stats.slow_requests += 1;
      this.stats.last_slow_request = { at, route: request.route, method: request.method, status: request.status, duration_ms: durationMs };
      log.warn({ route: request.route, method: request.method, status: request.status, duration_ms: durationMs, slow_ms: this.options.slowMs }, 'slow request (route_observability_slow_ms)');
    }
    if (overMemory && Date.now() - this.lastMemoryWarningAt >= MEMORY_WARNING_EVERY_MS) {
      this.lastMemoryWarningAt = Date.now();
      this.stats.memory_warnings += 1;
      log.warn({ route: request.route, rss_mib: rss, warn_rss_mib: this.options.memoryWarnRssMib }, 'process RSS above route_observability_memory_warn_rss_mib');
    }
    this.append(JSON.stringify({ at, route: request.route, method: request.method, status: request.status, duration_ms: durationMs, rss_mib: rss, ...(slow ? { slow: true } : {}) }));
  }

  health(): RouteObservabilityHealth {
    return {
      enabled: true,
      log_path: this.options.path,
      slow_ms: this.options.slowMs,
      memory_warn_rss_mib: this.options.memoryWarnRssMib,
      ...this.stats,
    };
  }

  private append(line: string): void {
    try {
      if (this.bytesWritten === undefined) {
        mkdirSync(dirname(this.options.path), { recursive: true, mode: 0o700 });
        this.bytesWritten = sizeOf(this.options.path);
      }
      if (this.bytesWritten >= this.rotateAtBytes) {
        renameSync(this.options.path, `${this.options.path}.1`);
        this.bytesWritten = 0;
      }
      const text = `${line}\n`;
      appendFileSync(this.options.path, text, { mode: 0o600 });
      this.bytesWritten += Buffer.byteLength(text);
      this.stats.last_write_error = null;
    } catch (error) {
      this.stats.last_write_error = (error as Error).message;
      this.bytesWritten = undefined;
    }
  }
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** Feeds every finished request to the route log. */
export function observeRoutes(app: FastifyInstance, observability: RouteObservability): void {
  app.addHook('onResponse', (request, reply, done) => {
    observability.record(
      { route: request.routeOptions.url ?? 'unmatched', method: request.method, status: reply.statusCode, durationMs: reply.elapsedTime },
      request.log,
    );
    done();
  });
}
