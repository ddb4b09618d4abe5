import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel, type WorkerOptions } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createActivities, type Activities } from '../activities/index.ts';
import { paperActivityQueue } from '../workflows/papers/paper-messages.ts';
import { SEARCH_ATTRIBUTES } from '../workflows/runs/run-messages.ts';
import { requestIdActivityInterceptor } from '../activities/request-id.ts';
import { requestIdClientInterceptor } from '../platform/temporal/request-id-header.ts';
import type { TemporalHealth } from '../api/deps.ts';
import { ensureSchedules, type ControlPlaneSchedules } from '../capabilities/automation/schedules.ts';
import { locateTemporalCli, temporalCliInstallHint } from '../platform/temporal/temporal-cli.ts';
import { ensureSearchAttributes, howToAdd, SearchAttributesRefusedError } from './search-attributes.ts';
import { connectionFailure, type TemporalConnectionPlan } from '../platform/temporal/temporal-connection.ts';
import { freePort, startTemporalDevServer, type TemporalDevServer } from '../platform/temporal/temporal-dev-server.ts';
import { loadWorkflowBundle } from '../platform/temporal/workflow-bundle.ts';
import type { RunLauncherSettings } from '../capabilities/runs/run-workflows.ts';
import { activityDeps, type Services } from './compose.ts';

const INSTALL_SCRIPT = fileURLToPath(new URL('../scripts/install-temporal-cli.sh', import.meta.url));
const WORKER_SHUTDOWN_GRACE = '10s';
/**
 * A workflow task handed to this worker's own (sticky) queue goes to the shared queue when no one takes it within
 * this time. The default is 10 s: after a crash, a run's next step would wait that long for the dead worker
 * (docs/runs.md#runs, crash recovery). A live worker takes its tasks within milliseconds; one that misses this under load
 * only replays the run's history once more.
 */
const STICKY_QUEUE_TIMEOUT = '3s';

export interface TemporalSettings {
  /** Where Temporal is and how to reach it (temporal-connection.ts); an empty address starts the embedded dev server. */
  connection: TemporalConnectionPlan;
  taskQueue: string;
  /** The embedded dev server's frontend port; unset: 7233 when free, else a free port. */
  devServerPort: number | undefined;
  /** Paper file steps (sync, writer, checklist) run at once, on their own task queue. */
  paperActivitySlots: number;
  /** OTLP/HTTP endpoint that traces go to; empty: no tracing. */
  otlpEndpoint: string;
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
  /**
   * The services composed on this runtime's client (with the one run, paper and cycle launcher of this process, on its
   * task queue): the activities run on them, and the HTTP routes are given the same ones.
   */
  services: Services;
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
/** The SDK's warning for a worker without workflows: the paper steps' worker runs activities only, by design. */
const ACTIVITY_ONLY_WORKER_NOTICE = 'No workflows registered, not polling for workflow tasks';
const METRICS_PORT_ATTEMPTS = 3;

/**
 * Routes the SDK's logs into pino, leaves signal handling to our own graceful shutdown, and has the SDK's native core
 * export its worker metrics on a loopback port that `GET /metrics` appends to its own
 * (docs/operations.md#metrics-and-observability). Once per process: the SDK allows one runtime. Returns that exporter's URL.
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
          if (entry.message === ACTIVITY_ONLY_WORKER_NOTICE) return;
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

/**
 * Finds the Temporal CLI, building it once with the install script. The script's lines go through the log, in the
 * order written: printed straight to the terminal, they overtook the log lines still buffered before them.
 */
async function ensureTemporalCli(progress: (message: string) => void): Promise<string> {
  const found = locateTemporalCli();
  if (found) return found;
  progress('the Temporal CLI is not installed yet; building it once (a few minutes)');
  const child = spawn('bash', [INSTALL_SCRIPT], { stdio: ['ignore', 'pipe', 'pipe'] });
  for (const output of [child.stdout, child.stderr]) {
    createInterface({ input: output, crlfDelay: Infinity }).on('line', (line) => {
      if (line.trim() !== '') progress(line);
    });
  }
  const status = await new Promise<number | null>((resolve) => {
    child.once('error', () => resolve(null));
    child.once('close', (code) => resolve(code));
  });
  const built = status === 0 ? locateTemporalCli() : undefined;
  if (!built) throw new Error(`could not provide the Temporal CLI. ${temporalCliInstallHint()}`);
  return built;
}

async function startEmbeddedServer(settings: TemporalSettings, progress: (message: string) => void): Promise<TemporalDevServer> {
  const dir = join(settings.stateDir, 'temporal');
  return startTemporalDevServer({
    binaryPath: await ensureTemporalCli(progress),
    dbFile: join(dir, 'temporal.db'),
    headless: !settings.uiEnabled,
    uiPort: settings.uiPort,
    ...(settings.devServerPort ? { port: settings.devServerPort } : {}),
    namespace: settings.connection.namespace,
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
 * about 20 MiB less at idle (docs/testing.md#memory). The SDK calls this debug mode and lifts its deadlock limit with it;
 * the limit (an option the SDK's types do not list) is put back, so a workflow task stuck for 5 s still fails.
 */
export const WORKFLOWS_ON_MAIN_THREAD: Pick<WorkerOptions, 'debugMode'> & { isolateExecutionTimeout: string } = {
  debugMode: true,
  isolateExecutionTimeout: '5s',
};

type PaperQueueActivities = Pick<Activities, 'gatherPaperEvidence' | 'writePaperDraft' | 'judgePaperDraft'>;

/** Each task queue's activities: the paper file steps on paperActivityQueue's (their own worker), the rest on the control-plane worker's. */
export function activitiesByQueue(activities: Activities): { main: Omit<Activities, keyof PaperQueueActivities>; papers: PaperQueueActivities } {
  const { gatherPaperEvidence, writePaperDraft, judgePaperDraft, ...main } = activities;
  return { main, papers: { gatherPaperEvidence, writePaperDraft, judgePaperDraft } };
}

/**
 * The worker of the paper file steps (workflows/papers/paper-workflow.ts): their own task queue and a few slots, so slow writers and
 * syncs never hold the slots of the runs' gate calls (docs/papers.md#papers, how long).
 */
export function createPaperActivityWorker(
  connection: NativeConnection,
  options: { namespace?: string; taskQueue: string; activities: PaperQueueActivities; slots: number; plugins?: WorkerOptions['plugins'] },
): Promise<Worker> {
  const { gatherPaperEvidence, writePaperDraft, judgePaperDraft } = options.activities;
  return Worker.create({
    connection,
    ...(options.namespace ? { namespace: options.namespace } : {}),
    taskQueue: paperActivityQueue(options.taskQueue),
    activities: { gatherPaperEvidence, writePaperDraft, judgePaperDraft },
    interceptors: { activity: [requestIdActivityInterceptor] },
    maxConcurrentActivityTaskExecutions: options.slots,
    shutdownGraceTime: WORKER_SHUTDOWN_GRACE,
    ...(options.plugins ? { plugins: options.plugins } : {}),
  });
}

export async function startTemporalRuntime(
  settings: TemporalSettings,
  deps: {
    /** The composition root, given the client and where its workflows run once connected: the process's services. */
    compose: (client: Client, where: RunLauncherSettings) => Services;
    schedules: ControlPlaneSchedules;
    logger: Logger;
    onProgress?: (message: string) => void;
  },
): Promise<TemporalRuntime> {
  const progress = deps.onProgress ?? (() => undefined);
  const metricsUrl = await installTemporalRuntime(deps.logger);
  const { connection: plan } = settings;
  const namespace = plan.namespace;
  const devServer = plan.address ? undefined : await startEmbeddedServer(settings, progress);
  const address = plan.address || devServer!.address;
  const cleanups: (() => Promise<void>)[] = [];
  try {
    if (devServer) cleanups.push(() => devServer.stop());
    // One connection for the client and the worker: one TLS session, one set of credentials.
    const connection = await NativeConnection.connect({ address, ...plan.options }).catch((error: unknown) => {
      throw plan.address ? connectionFailure(plan, error) : error;
    });
    cleanups.push(() => connection.close());
    const attributes = await ensureSearchAttributes(connection, namespace).catch((error: unknown) => {
      // A TLS server refusing the client's certificate may let the handshake finish and fail the first call; a server
      // that answered with a refusal was reached, and the refusal says what to do.
      throw plan.address && !(error instanceof SearchAttributesRefusedError) ? connectionFailure(plan, error) : error;
    });
    if (attributes === 'unverified') {
      const names = SEARCH_ATTRIBUTES.map((attribute) => attribute.name);
      deps.logger.warn(
        { namespace, search_attributes: names },
        `the Temporal server would not list the namespace's search attributes, so they are not checked: workflows need ${names.join(', ')} (Keyword); where missing, add them: ${howToAdd(namespace, names)}`,
      );
    }

    // Loaded only when on: a control plane without tracing never loads the OpenTelemetry SDK.
    const tracingModule = settings.otlpEndpoint ? await import('../platform/observability/tracing.ts') : undefined;
    const tracing = tracingModule?.startTracing(settings.otlpEndpoint);
    if (tracing) cleanups.push(() => tracing.shutdown());
    const plugins = tracing ? { plugins: [tracing.plugin] } : {};
    const client = new Client({ connection, namespace, interceptors: { workflow: [requestIdClientInterceptor] }, ...plugins });
    const { schedules } = deps;
    const services = deps.compose(client, { taskQueue: settings.taskQueue, namespace, uiUrl: devServer?.uiUrl });
    // Each worker registers only the activities its task queue is given: the paper file steps on theirs, the rest here.
    const queues = activitiesByQueue(createActivities(activityDeps(services)));
    const worker = await Worker.create({
      connection,
      namespace,
      taskQueue: settings.taskQueue,
      workflowBundle: await loadWorkflowBundle(progress, tracingModule ? { interceptorModules: [tracingModule.TRACING_WORKFLOW_INTERCEPTORS] } : {}),
      activities: queues.main,
      ...plugins,
      interceptors: { activity: [requestIdActivityInterceptor] },
      shutdownGraceTime: WORKER_SHUTDOWN_GRACE,
      stickyQueueScheduleToStartTimeout: STICKY_QUEUE_TIMEOUT,
      ...WORKFLOWS_ON_MAIN_THREAD,
    });
    const paperWorker = await createPaperActivityWorker(connection, { namespace, taskQueue: settings.taskQueue, activities: queues.papers, slots: settings.paperActivitySlots, ...plugins });
    const workers = [worker, paperWorker];
    // Before the workers run: a schedule that cannot be set up then fails the start with nothing left running.
    await ensureSchedules(client, schedules);
    const running = Promise.all(workers.map((each) => each.run()));
    running.catch((error: unknown) => deps.logger.error({ err: error }, 'Temporal worker stopped with an error'));
    const every = (schedule: { enabled: boolean; intervalSec: number }) => (schedule.enabled ? `every ${schedule.intervalSec} s` : 'paused');
    progress(`schedules: queue pump ${every(schedules.pump)}, queue check ${every(schedules.alerts)}`);
    progress(`Temporal worker polling task queue "${settings.taskQueue}" in namespace "${namespace}" at ${address} (${plan.security})`);
    if (tracing) progress(`tracing workflows and activities to ${settings.otlpEndpoint} (OTLP/HTTP)`);
    progress(`paper file steps on task queue "${paperActivityQueue(settings.taskQueue)}", ${settings.paperActivitySlots} at a time`);

    return {
      address,
      namespace,
      ...(devServer?.uiUrl ? { uiUrl: devServer.uiUrl } : {}),
      client,
      services,
      metricsUrl,
      async health() {
        let error: string | undefined;
        try {
          await connection.workflowService.describeNamespace({ namespace });
        } catch (cause) {
          error = (cause as Error).message;
        }
        const workerState = workers.find((each) => each.getState() !== 'RUNNING')?.getState() ?? 'RUNNING';
        return {
          ok: error === undefined && workerState === 'RUNNING',
          address,
          namespace,
          worker_state: workerState,
          ...(devServer?.uiUrl ? { ui_url: devServer.uiUrl } : {}),
          ...(error ? { error } : {}),
        };
      },
      async shutdown() {
        for (const each of workers) if (each.getState() === 'RUNNING') each.shutdown();
        await running.catch(() => undefined);
        for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
      },
    };
  } catch (error) {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    throw error;
  }
}
