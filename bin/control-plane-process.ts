import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { WorkerGateRole } from '../api/app.ts';
import { createServer } from '../api/create-server.ts';
import type { Config } from '../platform/config/schema.ts';
import { openStore } from '../platform/store/open-store.ts';
import type { Store } from '../platform/store/store.ts';
import { checkAnswersFromEnvironment, httpLimitsFrom } from './http-limits.ts';
import { operationalTraceFrom } from '../platform/observability/operational-trace-setup.ts';
import { routeObservabilityFrom } from '../platform/observability/route-observability-setup.ts';
import { ServiceMetrics } from '../platform/http/metrics.ts';
import { planTemporalConnection } from '../platform/temporal/temporal-connection.ts';
import { startTemporalRuntime, type TemporalRuntime } from './temporal-runtime.ts';
import { composeServices, routeDeps, serviceSettingsFrom } from './compose.ts';
import { temporalLaunchers } from './temporal-launchers.ts';
import { browsableHost } from '../platform/http/browsable-host.ts';
import { configFingerprint } from '../platform/config/fingerprint.ts';
import { ReplicaRegistry } from '../platform/cluster/replicas.ts';
import { registerScheduleMetrics } from '../capabilities/console/ledger-metrics.ts';
import { lastCompletedTicks, scheduleIntervals, type ControlPlaneSchedules } from '../capabilities/automation/schedules.ts';

export interface RunningControlPlane {
  url: string;
  /** The bound port (listen_port may be 0). */
  port: number;
  dashboardUrl: string;
  temporalAddress: string;
  temporalUiUrl?: string;
  /** Stop accepting, drain requests, shut the worker down with its grace period, stop Temporal, close the store. */
  stop(): Promise<void>;
}

/**
 * Starts the control-plane role: store, Temporal (embedded or remote) with its workers, then the HTTP server, which
 * also serves the worker gate role when one is given.
 */
export async function startControlPlane(config: Config, logger: Logger, workerGate?: WorkerGateRole): Promise<RunningControlPlane> {
  return startControlPlaneParts(config, logger, { serveHttp: true, ...(workerGate ? { workerGate } : {}) }) as Promise<RunningControlPlane>;
}

/** A Temporal worker alone (role `temporal_worker`): the store, Temporal and the workers, no HTTP server. */
export async function startTemporalWorker(config: Config, logger: Logger): Promise<{ temporalAddress: string; stop(): Promise<void> }> {
  return startControlPlaneParts(config, logger, { serveHttp: false });
}

async function startControlPlaneParts(
  config: Config,
  logger: Logger,
  options: { serveHttp: boolean; workerGate?: WorkerGateRole },
): Promise<RunningControlPlane | { temporalAddress: string; stop(): Promise<void> }> {
  const { workerGate } = options;
  const progress = (message: string) => logger.info(message);
  let store: Store | undefined;
  let temporal: TemporalRuntime | undefined;
  let app: FastifyInstance | undefined;
  let replicas: ReplicaRegistry | undefined;
  const stop = async () => {
    await app?.close();
    // The worker first: while it still polls, this replica may take tasks, so it leaves the cluster only after.
    await temporal?.shutdown();
    await replicas?.stop();
    await store?.close();
  };
  try {
    progress(`opening the ${config.control_plane_store_backend} store`);
    const opened = await openStore({
      backend: config.control_plane_store_backend,
      pgDatabaseUrl: config.pg_database_url,
      stateDir: config.state_dir,
      onProgress: progress,
    });
    store = opened;
    const trace = operationalTraceFrom(config);
    const settings = serviceSettingsFrom(config, trace);
    const { dispatch, alerts } = settings;
    const metrics = new ServiceMetrics();
    const fingerprint = configFingerprint(config);
    metrics.gaugeReadAtScrape('rcp_config_info', 'This replica\'s config fingerprint (every field but the per-replica ones); replicas of one cluster should share one', ['fingerprint'], () => [
      { labels: { fingerprint: fingerprint.fingerprint }, value: 1 },
    ]);
    if (!store.readOnly) {
      replicas = new ReplicaRegistry(store, fingerprint, [...dispatch.routing.lanes.keys()], String(config.listen_port));
      const cluster = await replicas.start((error) => logger.warn({ err: error }, 'could not report this replica to the replica registry'));
      progress(`config fingerprint ${cluster.config_fingerprint}; ${cluster.replicas.length} control-plane replica(s) live on this database`);
      if (cluster.drift) {
        logger.warn({ differing_fields: cluster.differing_fields, replicas: cluster.replicas }, `the control-plane replicas' configs differ (${cluster.differing_fields.join(', ')}): make them the same (docs/operations.md#running-on-several-machines)`);
      }
    }
    const temporalConnection = planTemporalConnection(config, process.env);
    const schedules: ControlPlaneSchedules = {
      taskQueue: config.temporal_task_queue,
      pump: { enabled: config.queue_pump_enabled, intervalSec: config.queue_pump_interval_sec },
      alerts: { enabled: alerts.push !== null || alerts.webhook !== null, intervalSec: config.queue_alert_check_interval_sec },
    };
    temporal = await startTemporalRuntime(
      {
        connection: temporalConnection,
        devServerPort: config.temporal_dev_server_port,
        paperActivitySlots: config.paper_activity_slots,
        otlpEndpoint: config.otel_exporter_otlp_endpoint,
        taskQueue: config.temporal_task_queue,
        uiEnabled: config.temporal_ui_enabled,
        uiPort: config.temporal_ui_port,
        stateDir: config.state_dir,
      },
      {
        compose: (client, where) => composeServices({ store: opened, settings, launchers: temporalLaunchers(client, where) }),
        schedules,
        logger,
        onProgress: progress,
      },
    );
    metrics.addScrapeSource(temporal.metricsUrl);
    const client = temporal.client;
    registerScheduleMetrics(metrics, config.temporal_task_queue, scheduleIntervals(schedules), () => lastCompletedTicks(client, schedules));
    if (!options.serveHttp) return { temporalAddress: temporal.address, stop };
    app = await createServer(
      routeDeps(temporal.services, {
        controlApiToken: config.control_api_bearer_token,
        sessionCookieSecure: config.session_cookie_secure,
        temporalHealth: temporal.health,
        dbPath: opened.location,
        metrics,
        legacyNotesApiEnabled: config.legacy_notes_api_enabled,
        ...(workerGate ? { workerGateReady: () => workerGate.gate.isReady(), workerGateIsolation: () => workerGate.gate.agentIsolation(), workerGateRunCgroups: () => workerGate.gate.runCgroups() } : {}),
        ...(replicas ? { clusterConfig: () => replicas!.view() } : {}),
      }),
      logger,
      {
        allowedHosts: config.allowed_hosts,
        limits: httpLimitsFrom(config),
        checkAnswers: checkAnswersFromEnvironment(),
        ...(workerGate ? { workerGate } : {}),
        ...(trace ? { operationalTrace: trace } : {}),
        ...routeObservabilityFrom(config),
      },
    );
    await app.listen({ host: config.listen_host, port: config.listen_port });
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.listen_port;
  const url = `http://${browsableHost(config.listen_host)}:${port}`;
  return {
    url,
    port,
    dashboardUrl: `${url}/control/dashboard-v2`,
    temporalAddress: temporal.address,
    ...(temporal.uiUrl ? { temporalUiUrl: temporal.uiUrl } : {}),
    stop,
  };
}
