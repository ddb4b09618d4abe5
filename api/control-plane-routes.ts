import type { FastifyInstance } from 'fastify';
import type { ServiceMetrics } from '../platform/http/metrics.ts';
import type { RouteObservability } from '../platform/observability/route-observability.ts';
import { registerControlPlaneMetrics } from '../capabilities/console/ledger-metrics.ts';
import { alertRoutes } from './automation/alert-routes.ts';
import { coreRoutes } from './core/core-routes.ts';
import { dashboardRoutes } from './console/dashboard-routes.ts';
import type { AppDeps } from './deps.ts';
import { dispatchRoutes } from './runs/dispatch-routes.ts';
import { eventRoutes } from './console/event-routes.ts';
import { followupRoutes } from './research/followup-routes.ts';
import { healthRoutes } from './health.ts';
import { observabilityRoutes } from './observability.ts';
import { operatorRoutes } from './queue/operator-routes.ts';
import { paperDraftingRoutes } from './papers/drafting-routes.ts';
import { paperRoutes } from './papers/paper-routes.ts';
import { preflightRoutes } from './runs/preflight-routes.ts';
import { projectRoutes } from './console/project-routes.ts';
import { queueRoutes } from './queue/queue-routes.ts';
import { researchRoutes } from './research/facility-routes.ts';
import { researchProviderRoutes } from './research/provider-routes.ts';
import { researchCycleRoutes } from './automation/cycle-routes.ts';
import { runRoutes } from './runs/run-routes.ts';
import { sessionRoutes } from './session.ts';
import { statusRoutes } from './console/status-routes.ts';
import { v1ListRoutes } from './console/list-routes.ts';
import { v1OverviewRoutes } from './console/overview-routes.ts';
import { whyRoutes } from './console/why-routes.ts';
import { v1ResearchRoutes } from './research/research-reads-routes.ts';
import { workerCallbackRoutes } from './runs/callback-routes.ts';
import { transcriptRoutes } from './runs/transcript-routes.ts';

export interface ControlPlaneRouteOptions {
  deps: AppDeps;
  metrics: ServiceMetrics;
  routeObservability?: RouteObservability;
  memoryWarnRssMib: number;
}

/** Every route of the control-plane role, and its metrics. */
export async function controlPlaneRoutes(app: FastifyInstance, options: ControlPlaneRouteOptions): Promise<void> {
  const { deps } = options;
  registerControlPlaneMetrics(options.metrics, { store: deps.store, dispatch: deps.dispatch, alerts: deps.alerts });
  await app.register(observabilityRoutes, {
    ...(options.routeObservability ? { routes: options.routeObservability } : {}),
    memoryWarnRssMib: options.memoryWarnRssMib,
  });
  await app.register(healthRoutes, deps);
  await app.register(eventRoutes, deps);
  await app.register(sessionRoutes, deps);
  await app.register(researchRoutes, deps);
  await app.register(researchProviderRoutes, deps);
  await app.register(followupRoutes, deps);
  await app.register(researchCycleRoutes, deps);
  await app.register(queueRoutes, deps);
  await app.register(statusRoutes, deps);
  await app.register(alertRoutes, deps);
  await app.register(operatorRoutes, deps);
  await app.register(preflightRoutes, deps);
  await app.register(dispatchRoutes, deps);
  await app.register(workerCallbackRoutes, deps);
  await app.register(runRoutes, deps);
  await app.register(transcriptRoutes, deps);
  await app.register(projectRoutes, deps);
  await app.register(paperRoutes, deps);
  await app.register(paperDraftingRoutes, deps);
  await app.register(v1ListRoutes, deps);
  await app.register(v1OverviewRoutes, deps);
  await app.register(whyRoutes, deps);
  await app.register(v1ResearchRoutes, deps);
  await app.register(coreRoutes, deps);
  await app.register(dashboardRoutes);
}
