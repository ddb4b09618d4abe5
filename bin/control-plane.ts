/**
 * Process entry point: configuration, roles, signals. Everything else lives in the modules it starts.
 *   npm start                      (first run writes state/config.json)
 *   SVC_CONFIG=/path/config.json npm start
 */
import { loadConfig, formatProblems } from '../platform/config/load.ts';
import { redactConfig, SECRET_FIELDS } from '../platform/config/schema.ts';
import pino, { type Logger } from 'pino';
import type { Config } from '../platform/config/schema.ts';
import { makePrivate } from '../platform/store/private-files.ts';
import { createLogger } from '../platform/observability/logger.ts';
import { logFormatFrom, readableDestination } from '../platform/observability/readable-log.ts';
import { createWorkerGateRole, startWorkerGateOnly } from './worker-gate-process.ts';
import { portTaken, portTakenMessage } from '../platform/http/listen-port.ts';

/**
 * Standard output, shared by the log lines and the banners: written apart (pino writes asynchronously), a banner could
 * overtake the log lines logged before it.
 */
const terminal = pino.destination({ dest: 1, sync: false, minLength: 0 });

const SHUTDOWN_DEADLINE_MS = 30_000;
const CONFIG_EXIT_CODE = 2;
const PORT_TAKEN_EXIT_CODE = 3;

async function main(): Promise<void> {
  const loaded = loadConfig({ env: process.env, cwd: process.cwd() });
  if (!loaded.ok) {
    process.stderr.write(`research-control-plane: refusing to start, the configuration has problems:\n${formatProblems(loaded.problems)}\n`);
    process.exit(CONFIG_EXIT_CODE);
  }
  const { config } = loaded;
  const format = logFormatFrom(process.env, process.stdout.isTTY === true);
  const logger = createLogger({
    level: process.env.LOG_LEVEL ?? 'info',
    secretConfigFields: SECRET_FIELDS,
    destination: format === 'readable' ? readableDestination(terminal) : terminal,
  });
  for (const warning of loaded.warnings) logger.warn(warning);
  // The run records, the embedded database and the traces live here: no other user (an agent's) may enter it.
  makePrivate(config.state_dir, { recursive: false });
  if (loaded.firstRun) {
    terminal.write(
      `\nFirst run: wrote ${loaded.configPath}\n` +
        `Your control API token (shown once; it is also in that file, readable only by you):\n\n    ${loaded.firstRun.token}\n\n`,
    );
  }
  // Before the slow part of the start (store, Temporal): a taken port is said within a second, not after it.
  const listens = !config.roles.includes('temporal_worker') && config.listen_port !== 0;
  if (listens && (await portTaken(config.listen_host, config.listen_port))) {
    terminal.flushSync();
    process.stderr.write(portTakenMessage(config.listen_host, config.listen_port, loaded.configPath));
    process.exit(PORT_TAKEN_EXIT_CODE);
  }
  logger.info({ config_path: loaded.configPath, config: redactConfig(config) }, 'configuration loaded');

  let running: { stop(): Promise<void> };
  try {
    running = config.roles.includes('control_plane')
      ? await startBothOrControlPlane(config, logger)
      : config.roles.includes('temporal_worker')
        ? await startTemporalWorkerOnly(config, logger)
        : await startGateOnly(config, logger);
  } catch (error) {
    logger.error({ err: error }, 'start-up failed');
    // Taken between the check above and the listen.
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      process.stderr.write(portTakenMessage(config.listen_host, config.listen_port, loaded.configPath));
      process.exit(PORT_TAKEN_EXIT_CODE);
    }
    // One plain line a person reads first, naming the setting when a setting is the cause.
    process.stderr.write(`research-control-plane: start-up failed: ${String((error as Error).message ?? error).split('\n')[0]}\n`);
    process.exit(1);
  }

  let stopping = false;
  const shutdown = async (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting without finishing the shutdown');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const deadline = setTimeout(() => {
      logger.error('shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    deadline.unref();
    try {
      await running.stop();
      logger.info('stopped cleanly');
      process.exit(0);
    } catch (error) {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', (signal) => void shutdown(signal));
  process.on('SIGINT', (signal) => void shutdown(signal));
}

async function startTemporalWorkerOnly(config: Config, logger: Logger): Promise<{ stop(): Promise<void> }> {
  const { startTemporalWorker } = await import('./control-plane-process.ts');
  const running = await startTemporalWorker(config, logger);
  logger.info({ temporal: running.temporalAddress, roles: config.roles }, 'Temporal worker ready');
  terminal.write(
    `\nresearch-control-plane Temporal worker is running (no HTTP server)\n` +
      `  Temporal:     ${running.temporalAddress}, task queues "${config.temporal_task_queue}" and "${config.temporal_task_queue}-papers"\n\n`,
  );
  return running;
}

async function startBothOrControlPlane(config: Config, logger: Logger): Promise<{ stop(): Promise<void> }> {
  const workerGate = config.roles.includes('worker_gate') ? createWorkerGateRole(config, logger) : undefined;
  // Loaded here, not at the top, so a gate-only process never loads the store, Temporal or the control API.
  const { startControlPlane } = await import('./control-plane-process.ts');
  const running = await startControlPlane(config, logger, workerGate?.role);
  if (workerGate) {
    workerGate.bindPort(running.port);
    try {
      await workerGate.role.gate.start();
    } catch (error) {
      await running.stop().catch(() => undefined);
      throw error;
    }
  }
  logger.info({ url: running.url, temporal: running.temporalAddress, roles: config.roles }, 'control plane ready');
  terminal.write(
    `\nresearch-control-plane is running\n` +
      `  dashboard:    ${running.dashboardUrl}\n` +
      `  API:          ${running.url}/control/api/v1/events  (Authorization: Bearer <token>)\n` +
      `  Temporal:     ${running.temporalAddress}${running.temporalUiUrl ? `\n  Temporal UI:  ${running.temporalUiUrl}` : ''}\n` +
      (workerGate ? `  worker gate:  ${running.url}/dashboard/api  (Authorization: Bearer <worker gate token>)\n` : '') +
      `  stop with Ctrl-C\n\n`,
  );
  return {
    stop: async () => {
      // The server stops first so no request reaches a stopping gate; the gate then finishes its current sample.
      await running.stop();
      await workerGate?.role.gate.stop();
    },
  };
}

async function startGateOnly(config: Config, logger: Logger): Promise<{ stop(): Promise<void> }> {
  const running = await startWorkerGateOnly(config, logger);
  logger.info({ url: running.url, roles: config.roles }, 'worker gate ready');
  terminal.write(
    `\nresearch-control-plane worker gate is running (no database, no Temporal)\n` +
      `  health:       ${running.url}/healthz\n` +
      `  dashboard:    ${running.url}/dashboard/api  (Authorization: Bearer <worker gate token>)\n` +
      `  stop with Ctrl-C\n\n`,
  );
  return running;
}

await main();
