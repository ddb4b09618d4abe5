import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel, type WorkerOptions } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createActivities } from '../../activities/index.ts';
import type { TemporalHealth } from '../../api/deps.ts';
import type { DispatchSettings } from '../../services/dispatch-settings.ts';
import type { PaperSettings } from '../../services/paper-settings.ts';
import type { Store } from '../../store/store.ts';
import type { AutomationDeps } from '../../activities/index.ts';
import { ensureSchedules, type ControlPlaneSchedules } from '../../clients/schedules.ts';
import { temporalRunLauncher } from '../../clients/run-workflows.ts';
import { temporalPaperLauncher } from '../../clients/paper-workflows.ts';
import { locateTemporalCli, temporalCliInstallHint } from './temporal-cli.ts';
import { ensureSearchAttributes } from './search-attributes.ts';
import { freePort, startTemporalDevServer, type TemporalDevServer } from './temporal-dev-server.ts';
import { loadWorkflowBundle } from './workflow-bundle.ts';

const INSTALL_SCRIPT = fileURLToPath(new URL('../../scripts/install-temporal-cli.sh', import.meta.url));
const WORKER_SHUTDOWN_GRACE = '10s';
/**
 * A workflow task handed to this worker's own (sticky) queue goes to the shared queue when no one takes it within
 * this time. The default is 10 s: after a crash, a run's next step would wait that long for the dead worker
 * (README "Runs", crash recovery). A live worker takes its tasks within milliseconds; one that misses this under load
 * only replays the run's history once more.
 */
const STICKY_QUEUE_TIMEOUT = '3s';

export interface TemporalSettings {
  /** Empty: start the embedded dev server with its SQLite file under stateDir. */
  address: string;
  namespace: string;
  taskQueue: string;
  /** Serve the embedded dev server's web UI (on uiPort). */
  uiEnabled: boolean;
  uiPort: number;
  stateDir: string;
}

export interface TemporalRuntime {
  address: string;
  namespace: string;
  uiUrl?: string;
  client: Client;
  /** The SDK core's Prometheus exporter (loopback only), appended to GET /metrics. */
  metricsUrl: string;
  health(): Promise<TemporalHealth>;
  shutdown(): Promise<void>;
}

const PINO_LEVEL: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

let runtimeMetricsUrl: string | undefined;
const METRICS_PORT_ATTEMPTS = 3;

/**
 * Routes the SDK's logs into pino, leaves signal handling to our own graceful shutdown, and has the SDK's native core
 * export its worker metrics on a loopback port that `GET /metrics` appends to its own (README "Metrics and
 * observability"). Once per process: the SDK allows one runtime. Returns that exporter's URL.
 */
async function installTemporalRuntime(logger: Logger): Promise<string> {
  if (runtimeMetricsUrl) return runtimeMetricsUrl;
  // The exporter must be told its port, and one found free may be taken before the exporter binds it: the install
  // then throws "Address already in use" and installs nothing, so it is tried again on another.
  for (let attempt = 1; ; attempt++) {
    const bindAddress = `127.0.0.1:${await freePort()}`;
    try {
      Runtime.install({
        logger: new DefaultLogger('WARN', (entry) => {
          logger[PINO_LEVEL[entry.level]]({ component: 'temporal', ...entry.meta }, entry.message);
        }),
        shutdownSignals: [],
        telemetryOptions: { metrics: { prometheus: { bindAddress, countersTotalSuffix: true, useSecondsForDurations: true, unitSuffix: true } } },
      });
    } catch (error) {
      if (attempt < METRICS_PORT_ATTEMPTS && /address already in use/i.test((error as Error).message)) continue;
      throw error;
    }
    runtimeMetricsUrl = `http://${bindAddress}/metrics`;
    return runtimeMetricsUrl;
  }
}

/** Finds the Temporal CLI, building it once with the install script (which prints its own progress). */
function ensureTemporalCli(progress: (message: string) => void): string {
  const found = locateTemporalCli();
  if (found) return found;
  progress('the Temporal CLI is not installed yet; building it once (a few minutes)');
  const result = spawnSync('bash', [INSTALL_SCRIPT], { stdio: 'inherit' });
  const built = result.status === 0 ? locateTemporalCli() : undefined;
  if (!built) throw new Error(`could not provide the Temporal CLI. ${temporalCliInstallHint()}`);
  return built;
}

async function startEmbeddedServer(settings: TemporalSettings, progress: (message: string) => void): Promise<TemporalDevServer> {
  const dir = join(settings.stateDir, 'temporal');
  return startTemporalDevServer({
    binaryPath: ensureTemporalCli(progress),
    dbFile: join(dir, 'temporal.db'),
    headless: !settings.uiEnabled,
    uiPort: settings.uiPort,
    namespace: settings.namespace,
    logFile: join(dir, 'dev-server.log'),
    pidFile: join(dir, 'dev-server.pid'),
    onProgress: progress,
  });
}

/**
 * Connects to Temporal (or starts the embedded dev server) and runs the control-plane worker on the task queue,
 * inside this process.
 */
/**
 * Workflow code runs in a VM context on the process's own thread instead of a worker thread with a V8 heap of its own:
 * about 20 MiB less at idle (README "Memory"). The SDK calls this debug mode and lifts its deadlock limit with it;
 * the limit (an option the SDK's types do not list) is put back, so a workflow task stuck for 5 s still fails.
 */
export const WORKFLOWS_ON_MAIN_THREAD: Pick<WorkerOptions, 'debugMode'> & { isolateExecutionTimeout: string } = {
  debugMode: true,
  isolateExecutionTimeout: '5s',
};

export async function startTemporalRuntime(
  settings: TemporalSettings,
  deps: {
    store: Store;
    settings: DispatchSettings;
    papers: PaperSettings;
    /** What the automation activities need beyond the store, dispatch and paper settings, and the queue pump's schedule. */
    automation: Pick<AutomationDeps, 'facility' | 'researchProvider' | 'pump' | 'alerts'> & { schedules: Omit<ControlPlaneSchedules, 'taskQueue'> };
    logger: Logger;
    onProgress?: (message: string) => void;
  },
): Promise<TemporalRuntime> {
  const progress = deps.onProgress ?? (() => undefined);
  const metricsUrl = await installTemporalRuntime(deps.logger);
  const devServer = settings.address ? undefined : await startEmbeddedServer(settings, progress);
  const address = settings.address || devServer!.address;
  const cleanups: (() => Promise<void>)[] = [];
  try {
    if (devServer) cleanups.push(() => devServer.stop());
    const clientConnection = await Connection.connect({ address });
    cleanups.push(() => clientConnection.close());
    const workerConnection = await NativeConnection.connect({ address });
    cleanups.push(() => workerConnection.close());
    await ensureSearchAttributes(clientConnection, settings.namespace);

    const client = new Client({ connection: clientConnection, namespace: settings.namespace });
    const { schedules, ...automationSettings } = deps.automation;
    const automation: AutomationDeps = {
      store: deps.store,
      dispatch: deps.settings,
      ...automationSettings,
      runs: temporalRunLauncher(client, { taskQueue: settings.taskQueue, namespace: settings.namespace }),
      papers: { settings: deps.papers, launcher: temporalPaperLauncher(client, { taskQueue: settings.taskQueue }) },
    };
    const worker = await Worker.create({
      connection: workerConnection,
      namespace: settings.namespace,
      taskQueue: settings.taskQueue,
      workflowBundle: await loadWorkflowBundle(progress),
      activities: createActivities({ store: deps.store, settings: deps.settings, papers: deps.papers, automation }),
      shutdownGraceTime: WORKER_SHUTDOWN_GRACE,
      stickyQueueScheduleToStartTimeout: STICKY_QUEUE_TIMEOUT,
      ...WORKFLOWS_ON_MAIN_THREAD,
    });
    // Before the worker runs: a schedule that cannot be set up then fails the start with nothing left running.
    await ensureSchedules(client, { ...schedules, taskQueue: settings.taskQueue });
    const running = worker.run();
    running.catch((error: unknown) => deps.logger.error({ err: error }, 'Temporal worker stopped with an error'));
    const every = (schedule: { enabled: boolean; intervalSec: number }) => (schedule.enabled ? `every ${schedule.intervalSec} s` : 'paused');
    progress(`schedules: queue pump ${every(schedules.pump)}, queue check ${every(schedules.alerts)}`);
    progress(`Temporal worker polling task queue "${settings.taskQueue}" in namespace "${settings.namespace}" at ${address}`);

    return {
      address,
      namespace: settings.namespace,
      ...(devServer?.uiUrl ? { uiUrl: devServer.uiUrl } : {}),
      client,
      metricsUrl,
      async health() {
        let error: string | undefined;
        try {
          await clientConnection.workflowService.describeNamespace({ namespace: settings.namespace });
        } catch (cause) {
          error = (cause as Error).message;
        }
        const workerState = worker.getState();
        return {
          ok: error === undefined && workerState === 'RUNNING',
          address,
          namespace: settings.namespace,
          worker_state: workerState,
          ...(devServer?.uiUrl ? { ui_url: devServer.uiUrl } : {}),
          ...(error ? { error } : {}),
        };
      },
      async shutdown() {
        if (worker.getState() === 'RUNNING') worker.shutdown();
        await running.catch(() => undefined);
        for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
      },
    };
  } catch (error) {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    throw error;
  }
}
