import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ServiceMetrics } from '../platform/http/metrics.ts';
import { errorResponses } from '../platform/http/responses.ts';
import { mib, rssMib, type RouteObservability } from '../platform/observability/route-observability.ts';
import type { AuthKind } from './auth.ts';

/** `GET /metrics` and the v1 observability reads (docs/operations.md#metrics-and-observability). */

export interface MetricsRouteOptions {
  metrics: ServiceMetrics;
  /** `control` where the control plane is served; `gate` on a worker gate alone. */
  auth: Extract<AuthKind, 'control' | 'gate'>;
}

export async function metricsRoute(instance: FastifyInstance, options: MetricsRouteOptions): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const schema = {
    tags: ['observability'],
    summary: 'Prometheus metrics (text exposition format)',
    response: {
      200: { description: 'The exposition', content: { 'text/plain': { schema: z.string() } } },
      ...errorResponses(401),
    },
  };
  app.get('/metrics', { config: { auth: options.auth }, schema }, async (_request, reply) =>
    reply.type(options.metrics.contentType).send(await options.metrics.exposition()),
  );
}

export interface ObservabilityRoutesOptions {
  /** Present when route_observability_enabled. */
  routes?: RouteObservability;
  /** route_observability_memory_warn_rss_mib; 0 disables the warning. */
  memoryWarnRssMib: number;
}

const LastSlowRequestSchema = z.object({
  at: z.string(),
  route: z.string(),
  method: z.string(),
  status: z.number().int(),
  duration_ms: z.number(),
});

const RouteHealthSchema = z.object({
  enabled: z.boolean(),
  log_path: z.string().optional(),
  slow_ms: z.number().optional(),
  memory_warn_rss_mib: z.number().optional(),
  requests: z.number().int().optional().describe('Requests recorded since start-up'),
  slow_requests: z.number().int().optional(),
  memory_warnings: z.number().int().optional().describe('RSS warnings logged since start-up (at most one a minute)'),
  last_slow_request: LastSlowRequestSchema.nullable().optional(),
  last_write_error: z.string().nullable().optional(),
  started_at: z.string().optional(),
});

const MemorySchema = z.object({
  rss_mib: z.number(),
  heap_used_mib: z.number(),
  heap_total_mib: z.number(),
  external_mib: z.number(),
  warn_rss_mib: z.number().describe('route_observability_memory_warn_rss_mib; 0 when no warning is set'),
  warning: z.boolean().describe('True when warn_rss_mib is set and RSS is above it'),
});

export async function observabilityRoutes(instance: FastifyInstance, options: ObservabilityRoutesOptions): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const config = { auth: 'control' as const };
  app.get(
    '/control/api/v1/observability/health',
    { config, schema: { tags: ['observability'], summary: 'Route observability: whether it is on, its log and its counts', response: { 200: RouteHealthSchema, ...errorResponses(401) } } },
    async () => options.routes?.health() ?? { enabled: false },
  );
  app.get(
    '/control/api/v1/observability/memory',
    { config, schema: { tags: ['observability'], summary: 'The process\'s memory and whether it is above the warning level', response: { 200: MemorySchema, ...errorResponses(401) } } },
    async () => {
      const usage = process.memoryUsage();
      const rss = rssMib();
      return {
        rss_mib: rss,
        heap_used_mib: mib(usage.heapUsed),
        heap_total_mib: mib(usage.heapTotal),
        external_mib: mib(usage.external),
        warn_rss_mib: options.memoryWarnRssMib,
        warning: options.memoryWarnRssMib > 0 && rss > options.memoryWarnRssMib,
      };
    },
  );
}
