/**
 * Process entry point: configuration, roles, signals. Everything else lives in the modules it starts.
 *   npm start                      (first run writes state/config.json)
 *   SVC_CONFIG=/path/config.json npm start
 */
import { loadConfig, formatProblems } from '../config/load.ts';
import { redactConfig, SECRET_FIELDS } from '../config/schema.ts';
import { startControlPlane, type RunningControlPlane } from './runtime/control-plane-process.ts';
import { createLogger } from './runtime/logger.ts';

const SHUTDOWN_DEADLINE_MS = 30_000;
const CONFIG_EXIT_CODE = 2;

async function main(): Promise<void> {
  const loaded = loadConfig({ env: process.env, cwd: process.cwd() });
  if (!loaded.ok) {
    process.stderr.write(`research-control-plane: refusing to start, the configuration has problems:\n${formatProblems(loaded.problems)}\n`);
    process.exit(CONFIG_EXIT_CODE);
  }
  const { config } = loaded;
  const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'info', secretConfigFields: SECRET_FIELDS });
  for (const warning of loaded.warnings) logger.warn(warning);
  if (loaded.firstRun) {
    process.stdout.write(
      `\nFirst run: wrote ${loaded.configPath}\n` +
        `Your control API token (shown once; it is also in that file, readable only by you):\n\n    ${loaded.firstRun.token}\n\n`,
    );
  }
  logger.info({ config_path: loaded.configPath, config: redactConfig(config) }, 'configuration loaded');

  if (!config.roles.includes('control_plane')) {
    process.stderr.write('research-control-plane: this build serves the control_plane role only; add "control_plane" to roles.\n');
    process.exit(CONFIG_EXIT_CODE);
  }
  if (config.roles.includes('worker_gate')) {
    logger.warn('the worker_gate role is configured but this build does not serve it yet; only the control plane runs');
  }

  let running: RunningControlPlane;
  try {
    running = await startControlPlane(config, logger);
  } catch (error) {
    logger.error({ err: error }, 'start-up failed');
    process.exit(1);
  }

  logger.info({ url: running.url, temporal: running.temporalAddress }, 'control plane ready');
  process.stdout.write(
    `\nresearch-control-plane is running\n` +
      `  dashboard:    ${running.dashboardUrl}\n` +
      `  API:          ${running.url}/control/api/v1/events  (Authorization: Bearer <token>)\n` +
      `  Temporal:     ${running.temporalAddress}${running.temporalUiUrl ? `\n  Temporal UI:  ${running.temporalUiUrl}` : ''}\n` +
      `  stop with Ctrl-C\n\n`,
  );

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

await main();
