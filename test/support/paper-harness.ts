import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { inject } from 'vitest';
import { createActivities } from '../../activities/index.ts';
import { createPaperActivityWorker, WORKFLOWS_ON_MAIN_THREAD } from '../../bin/temporal-runtime.ts';
import { ensureSearchAttributes } from '../../bin/search-attributes.ts';
import { loadWorkflowBundle } from '../../platform/temporal/workflow-bundle.ts';
import { temporalLaunchers } from '../../bin/temporal-launchers.ts';
import { paperIdFor } from '../../capabilities/papers/domain/paper-status.ts';
import type { PaperSettings } from '../../capabilities/papers/paper-settings.ts';
import { ServiceSecrets } from '../../platform/config/service-secrets.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { NO_WORKERS, startTestApp, TEST_GATE_TOKEN, TEST_TOKEN, type TestApp } from './app.ts';
import { quietTemporalLogs } from './temporal.ts';

/**
 * The paper pipeline in one test process: the HTTP app on a test database, and a Temporal worker (on the run's dev
 * server, its own task queue) running the paper workflows with these paper settings. Completed runs are seeded
 * straight into the ledgers, their evidence written under the harness's project root.
 */

export interface PaperHarness {
  t: TestApp;
  settings: PaperSettings;
  /** `{status, body}` of a JSON call with the test token. */
  call(method: 'GET' | 'POST', url: string, body?: Record<string, unknown>): Promise<{ status: number; body: Record<string, any> }>;
  /** A completed run with its project; evidence files written unless `evidence` is false. Returns the paper id. */
  completedRun(projectId: string, options?: CompletedRunOptions): Promise<string>;
  close(): Promise<void>;
}

export interface CompletedRunOptions {
  decision?: string;
  /** Files written into the project directory; false writes none (the gate's summary still says they exist). */
  evidence?: Record<string, string> | false;
  finishedAt?: string;
}

export const evidenceFiles = (results: Record<string, unknown> = { accuracy: 0.912, loss: 0.31 }, decision = 'finalize_positive'): Record<string, string> => ({
  'run_notes.md': '# Notes\nTried two block sizes; 64 won.\n',
  '.research/decision.json': JSON.stringify({ decision, summary: 'Block size 64 kept accuracy while halving memory.' }),
  'results/main/metrics.json': JSON.stringify(results),
});

export async function startPaperHarness(configure: (dirs: { stateDir: string; projectRoot: string }) => Partial<PaperSettings> = () => ({})): Promise<PaperHarness> {
  quietTemporalLogs();
  const dir = await mkdtemp(join(tmpdir(), 'rcp-papers-'));
  const dirs = { stateDir: join(dir, 'state'), projectRoot: join(dir, 'projects') };
  const settings: PaperSettings = {
    ...dirs,
    writer: { provider: 'deterministic', hosted: null, fallback: true },
    evidenceSync: null,
    // As the app's own config would give them: the tokens it is served with.
    secrets: ServiceSecrets.of([
      { name: 'control_api_bearer_token', value: TEST_TOKEN },
      { name: 'worker_wake_gate_bearer_token', value: TEST_GATE_TOKEN },
    ]),
    ...configure(dirs),
  };
  const taskQueue = `papers-${randomBytes(4).toString('hex')}`;
  const address = inject('temporalAddress');
  const clientConnection = await Connection.connect({ address });
  // As the control plane's start does: paper workflows carry the project_id search attribute.
  await ensureSearchAttributes(clientConnection, 'default');
  const client = new Client({ connection: clientConnection });
  const t = await startTestApp({ dispatch: NO_WORKERS, papers: { settings, launcher: temporalLaunchers(client, { taskQueue, namespace: 'default' }).papers } });
  const workerConnection = await NativeConnection.connect({ address });
  const activities = createActivities({ store: t.store, settings: NO_WORKERS, papers: settings });
  const worker = await Worker.create({
    connection: workerConnection,
    taskQueue,
    workflowBundle: await loadWorkflowBundle(),
    activities,
    ...WORKFLOWS_ON_MAIN_THREAD,
  });
  // As the control plane runs them: the paper file steps on their own task queue.
  const paperWorker = await createPaperActivityWorker(workerConnection, { taskQueue, activities, slots: 4 });
  const running = Promise.all([worker.run(), paperWorker.run()]);

  let runSecond = 0;
  return {
    t,
    settings,
    async call(method, url, body) {
      const response = await t.app.inject({ method, url, headers: t.auth, ...(body ? { payload: body } : {}) });
      return { status: response.statusCode, body: response.json() as Record<string, any> };
    },
    async completedRun(projectId, options = {}) {
      runSecond += 1;
      const runId = `${projectId}-20261122T1000${String(runSecond % 60).padStart(2, '0')}Z`;
      const decision = options.decision ?? 'finalize_positive';
      const files = options.evidence === false ? null : (options.evidence ?? evidenceFiles(undefined, decision));
      const summary = { run_notes: true, decision_file: true, results_json_files: 1, decision, decision_summary: 'summary', sufficient_for_paper: true };
      await t.store.transaction(async (tx) => {
        await insertProject(tx, { project_id: projectId, project_name: `Paper ${projectId}`, project_dir: projectId, workload_class: 'unknown' });
        await tx.query(
          `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, decision_summary, evidence, finished_at)
           VALUES ($1, $2, $3, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'test', $4, 'summary', $5::jsonb, $6)`,
          [runId, projectId, `run:${runId}`, decision, JSON.stringify(summary), options.finishedAt ?? new Date().toISOString()],
        );
      });
      if (files) {
        for (const [rel, text] of Object.entries(files)) {
          const path = join(dirs.projectRoot, projectId, rel);
          await mkdir(join(path, '..'), { recursive: true });
          await writeFile(path, text);
        }
      }
      return paperIdFor(projectId, runId);
    },
    async close() {
      worker.shutdown();
      paperWorker.shutdown();
      await running.catch(() => undefined);
      await workerConnection.close();
      await clientConnection.close();
      await t.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
