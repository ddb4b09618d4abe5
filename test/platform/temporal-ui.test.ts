import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstRunConfig } from '../../platform/config/first-run.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { launchChromium, SCREENSHOT_DIR } from '../support/browser.ts';
import { controlClient } from '../support/control-plane.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startServiceProcess, waitUntil, type ServiceProcess } from '../support/gate.ts';
import { testPort } from '../support/ports.ts';

// expected duration: ~30 s (npm start's one-machine shape, its embedded Temporal with the UI, and Chromium)

/**
 * What an operator finds in the Temporal UI: the one-machine shape `npm start` writes (both roles, the embedded
 * Temporal with its UI, the bundled simulated agent), on a test database, with a live dispatch. Chromium opens the UI's
 * workflow list filtered by the run's project, finds the run there, and opens it: its summary, details and current
 * details are on its page. (The list of Temporal UI 2.42 offers no summary column; the search attributes are how the
 * list finds a run.)
 */

let dir: string;
let database: TestDatabase;
let control: ServiceProcess;
let browser: Browser;
let url: string;
let uiUrl: string;
let api: ReturnType<typeof controlClient>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rcp-temporal-ui-'));
  database = await createTestDatabase();
  const [port, uiPort, frontendPort] = [await testPort(), await testPort(), await testPort()];
  url = `http://127.0.0.1:${port}`;
  uiUrl = `http://127.0.0.1:${uiPort}`;
  const base = firstRunConfig();
  const configPath = join(dir, 'config.json');
  await writeFile(
    configPath,
    JSON.stringify({
      ...base,
      listen_port: port,
      completion_callback_url: `${url}/control/api/worker-callback`,
      worker_wake_gate_url: url,
      control_plane_store_backend: 'pg',
      pg_database_url: database.url,
      temporal_ui_port: uiPort,
      temporal_dev_server_port: frontendPort,
      live_dispatch_enabled: true,
      default_workload_class: 'unknown',
    }),
  );
  control = await startServiceProcess('control plane', { configPath, url, env: { TEMPORAL_ADDRESS: '', SIMULATED_AGENT_WORK_SEC: '30' }, readyTimeoutMs: 120_000 });
  api = controlClient(url, base.control_api_bearer_token as string);
  browser = await launchChromium();
}, 180_000);

/** The run the test dispatched: canceled at the end, which stops its agent (a gate that stops leaves its runs going). */
let dispatchedRunId: string | undefined;

afterAll(async () => {
  await browser?.close();
  if (dispatchedRunId) await api('POST', `/control/api/runs/${dispatchedRunId}/cancel`, { requested_by: 'ui-operator', reason: 'the test is done with it' });
  await control?.kill('SIGTERM');
  await database?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe('the Temporal UI', () => {
  it("lists a run by its project, and shows its summary, details and phase on its page", { timeout: 90_000 }, async () => {
    const store = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
    try {
      await store.transaction(async (tx) => {
        await insertProject(tx, { project_id: 'ui-probe', project_name: 'UI probe', project_dir: 'ui-probe', workload_class: 'unknown' });
        await insertQueueItem(tx, { project_id: 'ui-probe', project_name: 'UI probe', workload_class: 'unknown' });
      });
    } finally {
      await store.close();
    }
    const live = await api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'ui-operator' });
    expect(live.status, JSON.stringify(live.body)).toBe(200);
    expect(live.body.action).toBe('live_dispatch');
    dispatchedRunId = live.body.run_id as string;
    const workflowId = `run:${dispatchedRunId}`;

    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    try {
      const query = encodeURIComponent('project_id="ui-probe"');
      // Visibility lags a moment behind the start: the list is read again until the run is in it.
      await waitUntil('the run in the UI list filtered by its project', async () => {
        await page.goto(`${uiUrl}/namespaces/default/workflows?query=${query}`);
        // The UI is a single-page app: the list appears a moment after the page has loaded.
        return page.getByRole('link', { name: workflowId }).first().waitFor({ timeout: 5_000 }).then(() => true, () => undefined);
      }, 45_000, 500).catch(async (error: unknown) => {
        await page.screenshot({ path: join(SCREENSHOT_DIR, 'temporal-ui-list.png'), fullPage: true });
        throw new Error(`${(error as Error).message}; the page read:\n${(await page.locator('body').innerText()).slice(0, 1500)}`);
      });
      await page.getByRole('link', { name: workflowId }).first().click();
      // The run's page: its summary, and under User Metadata its details and, read from its worker while the agent
      // works, its current details.
      await page.getByText('User Metadata', { exact: true }).click();
      // Temporal's markdown (summary, details) is drawn in sandboxed frames: the page's text is every frame's.
      const text = async () => (await Promise.all(page.frames().map((frame) => frame.locator('body').innerText().catch(() => '')))).join('\n');
      await expect.poll(text, { timeout: 20_000 }).toContain('run of ui-probe on default, dispatched by ui-operator');
      // Each frame draws on its own: every piece is waited for.
      await expect.poll(text, { timeout: 20_000 }).toMatch(/lane default/);
      // Each ledger step is listed by its summary.
      await expect.poll(text, { timeout: 20_000 }).toContain('claim ui-probe on default');
      await expect.poll(text, { timeout: 20_000 }).toMatch(/awaiting callbacks · run (running|awaiting_wake)/);
      await page.screenshot({ path: join(SCREENSHOT_DIR, 'temporal-ui-run.png'), fullPage: true });
    } finally {
      await page.close();
    }
  });
});
