import type { Client } from '@temporalio/client';
import { temporalCycleLauncher } from '../capabilities/automation/cycle-workflows.ts';
import { temporalPaperLauncher } from '../capabilities/papers/paper-workflows.ts';
import { temporalRunLauncher, type RunLauncherSettings } from '../capabilities/runs/run-workflows.ts';
import type { Launchers } from './compose.ts';

/**
 * The launchers on one Temporal client and task queue; the run launcher links each run to the Temporal UI when one is
 * known. Apart from the rest of the root so that what needs no Temporal (the test app, the HTTP-only harnesses) does not
 * load the Temporal client.
 */
export function temporalLaunchers(client: Client, where: RunLauncherSettings): Launchers {
  return {
    runs: temporalRunLauncher(client, where),
    papers: temporalPaperLauncher(client, { taskQueue: where.taskQueue }),
    cycles: temporalCycleLauncher(client, { taskQueue: where.taskQueue }),
  };
}
