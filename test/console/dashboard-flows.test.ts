import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserState, inPage, launchChromium, openDashboard, type DashboardTab } from '../support/browser.ts';
import { CONTROL_TOKEN } from '../support/gate.ts';
import { candidate } from '../support/research.ts';
import { RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';

// expected duration: ~90 s

/**
 * The dashboard in Debian's Chromium against the whole product: a control plane process on real Postgres and the
 * run's Temporal dev server, and a worker gate whose dispatch script is the fake agent. An operator signs in and
 * out, runs commands dry first and then live, cancels a run, and takes a candidate all the way to an imported paper
 * and a research cycle, from the dashboard alone.
 */

/** Text that would run script if any of it reached the HTML parser. */
const XSS_TITLE = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> Probe';

let stack: RunStack;
let browser: Browser;
let tab: DashboardTab;

beforeAll(async () => {
  // The control plane reads a run's evidence where the gate's agent wrote it: one project root for both.
  [stack, browser] = await Promise.all([startRunStack({ controlPlaneOverrides: (gate) => ({ project_root: gate.projectRoot }) }), launchChromium()]);
  tab = await openDashboard(browser, stack.cpFixture.url);
  await tab.signIn(CONTROL_TOKEN);
}, RUN_STACK_START_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

const liveCalls = (path: string) => tab.calls.filter((call) => call.method === 'POST' && call.path === path && call.body?.includes('"dry_run":false'));

describe('signing in', () => {
  it('exchanges the token for an HttpOnly session that survives a reload, keeps nothing in the browser, and signs out', { timeout: 30_000 }, async () => {
    const own = await openDashboard(browser, stack.cpFixture.url);
    try {
      await own.signIn(CONTROL_TOKEN);
      const cookies = await own.page.context().cookies();
      expect(cookies.map(({ name, httpOnly, sameSite, path }) => ({ name, httpOnly, sameSite, path }))).toEqual([{ name: 'cp_session', httpOnly: true, sameSite: 'Strict', path: '/control' }]);
      expect(cookies[0]!.value).not.toContain(CONTROL_TOKEN);
      expect(await browserState(own.page)).toEqual({ localStorage: 0, sessionStorage: 0, scriptCookies: '', indexedDb: 0 });

      await own.page.reload();
      await own.page.locator('nav a[aria-current="page"]').waitFor();
      await expect.poll(() => own.card('Operator lanes').locator('.lane-card').count()).toBe(5);
      expect(await own.page.getByLabel('Control API token').count()).toBe(0);

      await own.page.getByRole('button', { name: 'Sign out' }).click();
      await own.page.getByLabel('Control API token').waitFor();
      expect((await own.page.context().cookies()).filter((cookie) => cookie.name === 'cp_session')).toEqual([]);
      await own.page.reload();
      await own.page.getByLabel('Control API token').waitFor();

      expect(own.page.url()).not.toContain(CONTROL_TOKEN);
      expect(own.calls.some((call) => call.path.includes(CONTROL_TOKEN))).toBe(false);
      expect(own.calls.filter((call) => call.headers.authorization)).toEqual([]);
      expect(await browserState(own.page)).toEqual({ localStorage: 0, sessionStorage: 0, scriptCookies: '', indexedDb: 0 });
      expect(own.problems).toEqual([]);
    } finally {
      await own.close();
    }
  });

  it('goes back to the sign-in form, saying why, once the session ends elsewhere', { timeout: 30_000 }, async () => {
    const own = await openDashboard(browser, stack.cpFixture.url);
    try {
      await own.signIn(CONTROL_TOKEN);
      await own.open('#/queue');
      // The same session signs out from another tab: this one learns it on its next poll.
      await inPage(own.page, `fetch('/control/api/session').then((r) => r.json()).then(({ csrf_token }) => fetch('/control/api/session', { method: 'DELETE', headers: { 'x-csrf-token': csrf_token } }))`);
      await own.page.getByLabel('Control API token').waitFor({ timeout: 15_000 });
      expect(await own.page.getByRole('status').innerText()).toContain('The session ended');
      expect(await own.page.locator('nav').isHidden()).toBe(true);
    } finally {
      await own.close();
    }
  });

  it('says in place when the token is wrong', { timeout: 20_000 }, async () => {
    const own = await openDashboard(browser, stack.cpFixture.url);
    try {
      await own.page.goto(`${stack.cpFixture.url}/control/dashboard-v2`);
      await own.page.getByLabel('Control API token').fill('not-the-token');
      await own.page.getByRole('button', { name: 'Sign in' }).click();
      await expect.poll(() => own.page.getByRole('alert').innerText()).toContain('invalid bearer token');
      expect(await own.page.getByLabel('Control API token').inputValue()).toBe('');
    } finally {
      await own.close();
    }
  });
});

describe('the dashboard as an operator uses it', () => {
  // A tab of its own and a sign-in: under the full suite on two cores that alone took 20 s once, and the whole test
  // outlasted 60 s once.
  it('shows a refused command\'s detail in place, one line per problem', { timeout: 120_000 }, async () => {
    // A tab of its own: the browser logs the 422 it answers, which the other tests count as a problem.
    const own = await openDashboard(browser, stack.cpFixture.url);
    try {
      await own.signIn(CONTROL_TOKEN);
      await own.open('#/research');
      const importing = own.card('Import candidates');
      await importing.getByLabel('Batch (JSON)').fill(JSON.stringify({ candidates: [{ title: '', dedupe_key: 'x' }] }));
      await importing.getByRole('button', { name: 'Dry run' }).click();
      const alert = importing.getByRole('alert');
      await expect.poll(() => alert.innerText()).toContain('HTTP 422');
      expect(await alert.locator('li').count()).toBeGreaterThan(1);
      expect(await alert.innerText()).toContain('body.candidates.0.title');
      expect(await importing.getByRole('button', { name: 'Import it' }).count()).toBe(0);
    } finally {
      await own.close();
    }
  });

  it('stops polling while the tab is hidden and reads again as soon as it is shown', { timeout: 30_000 }, async () => {
    await tab.open('#/overview');
    await tab.card('Operator lanes').locator('.lane-card').first().waitFor();
    const reads = () => tab.calls.filter((call) => call.method === 'GET').length;
    const showAs = (state: 'hidden' | 'visible') =>
      inPage(tab.page, `Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => '${state}' }); document.dispatchEvent(new Event('visibilitychange'))`);
    await showAs('hidden');
    const hiddenAt = reads();
    // Longer than one polling interval (5 s): a tab that kept polling would have read again by now.
    await tab.page.waitForTimeout(6_500);
    expect(reads()).toBe(hiddenAt);
    await showAs('visible');
    await expect.poll(reads, { timeout: 2_000 }).toBeGreaterThan(hiddenAt);
  });

  it('stops polling after 25 minutes without a click or a key, and goes on at the next one', { timeout: 30_000 }, async () => {
    const own = await openDashboard(browser, stack.cpFixture.url);
    try {
      // The page's clock, so 25 minutes pass at once; its timers still run as the page set them.
      await own.page.clock.install();
      await own.signIn(CONTROL_TOKEN);
      await own.open('#/overview');
      await own.card('Operator lanes').locator('.lane-card').first().waitFor();
      const reads = () => own.calls.filter((call) => call.method === 'GET').length;
      await own.page.clock.fastForward('25:30');
      await own.page.clock.runFor(6_000);
      await expect.poll(() => own.page.getByText('Updates paused').isVisible()).toBe(true);
      const pausedAt = reads();
      await own.page.clock.runFor(20_000);
      expect(reads()).toBe(pausedAt);
      await own.page.keyboard.press('Shift');
      await expect.poll(reads).toBeGreaterThan(pausedAt);
      expect(await own.page.getByText('Updates paused').isVisible()).toBe(false);
    } finally {
      await own.close();
    }
  });

  it('cancels a run from its page, after asking once more', { timeout: 60_000 }, async () => {
    const imported = await stack.api('POST', '/control/api/research/import-candidates', {
      requested_by: 'test',
      dry_run: false,
      candidates: [candidate({ title: 'Long-running run to cancel', dedupe_key: 'dashboard-cancel', hypothesis: 'A run that works for two minutes.', mechanism: 'Wait.' })],
    });
    const candidateId = imported.body.results[0].candidate_id;
    const promoted = await stack.api('POST', '/control/api/research/promote-candidate', { candidate_id: candidateId, dry_run: false, requested_by: 'test', idempotency_key: 'dashboard-cancel' });
    const projectId = promoted.body.project_id as string;
    await stack.writeScenario(projectId, { scenario: 'normal', work_sec: 120 });
    const dispatched = await stack.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'test' });
    expect(dispatched.body.action).toBe('live_dispatch');
    stack.agents.remember(dispatched.body);
    const runId = dispatched.body.run_id as string;

    await tab.open(`#/runs/${runId}`);
    await tab.page.getByRole('button', { name: 'Cancel this run…' }).click();
    await tab.page.getByRole('button', { name: 'Keep' }).click();
    expect(tab.calls.filter((call) => call.path === `/control/api/runs/${runId}/cancel`)).toEqual([]);
    await tab.page.getByRole('button', { name: 'Cancel this run…' }).click();
    await tab.page.getByRole('button', { name: 'Yes, cancel the run' }).click();
    await expect.poll(() => tab.card('Run').innerText(), { timeout: 30_000 }).toContain('canceled');
    expect((await stack.api('GET', `/control/api/v1/runs/${runId}`)).body.run.state).toBe('canceled');
    expect(await tab.page.getByRole('button', { name: 'Cancel this run…' }).count()).toBe(0);
  });

  it('takes a candidate to an imported paper and runs a cycle, every command dry first, from the dashboard alone', { timeout: 180_000 }, async () => {
    // Import the probe as an operator would: the live button exists only once a dry run answered.
    await tab.open('#/research');
    const importing = tab.card('Import candidates');
    const probe = candidate({ title: XSS_TITLE, dedupe_key: 'dashboard-probe', workload_class: 'unknown' });
    await importing.getByLabel('Batch (JSON)').fill(JSON.stringify({ candidates: [probe] }));
    expect(await importing.getByRole('button', { name: 'Import it' }).count()).toBe(0);
    await importing.getByRole('button', { name: 'Dry run' }).click();
    await importing.locator('.preview').waitFor();
    await importing.getByRole('button', { name: 'Import it' }).click();
    await expect.poll(() => importing.locator('.outcome').innerText()).toContain('admitted 1');

    // The title shows as text wherever it appears, and none of it ran.
    const candidates = tab.card('Candidates');
    const row = candidates.locator('tbody tr', { hasText: 'Probe' });
    await expect.poll(() => row.locator('.candidate-title').innerText()).toBe(XSS_TITLE);
    expect(await tab.page.locator('main img').count()).toBe(0);

    // Promote it: dry run, then live.
    await row.getByRole('button', { name: 'Select for promotion' }).click();
    const promote = tab.card('Promote the selected candidate');
    expect(await promote.getByRole('button', { name: 'Promote it' }).count()).toBe(0);
    await promote.getByRole('button', { name: 'Dry run' }).click();
    await expect.poll(() => promote.locator('.preview').innerText()).toContain(XSS_TITLE);
    await promote.getByRole('button', { name: 'Promote it' }).click();
    await expect.poll(() => promote.locator('.outcome').innerText()).toContain('Promoted');
    const projectId = (await stack.api('GET', '/control/api/v1/queue?group=queued')).body.items.find((item: { project_name: string }) => item.project_name === XSS_TITLE).project_id;
    await stack.writeScenario(projectId, { scenario: 'normal', work_sec: 1, decision: 'finalize_positive', results: { score: 0.91, baseline_score: 0.84 } });

    // Dispatch it, chosen from its row: the dry run shows the candidate, its route and the preflight; a double click
    // dispatches once.
    await tab.open('#/queue');
    const dispatch = tab.card('Dispatch an item');
    expect(await dispatch.getByRole('button', { name: 'Dispatch it live' }).count()).toBe(0);
    await tab.card('Items').locator('tbody tr', { hasText: projectId }).getByRole('button', { name: 'Dispatch…' }).click();
    const preview = dispatch.locator('.preview');
    await expect.poll(() => preview.innerText()).toContain(XSS_TITLE);
    expect(await dispatch.getByLabel('Project id').inputValue()).toBe(projectId);
    await expect.poll(() => inPage(tab.page, 'document.activeElement?.textContent')).toBe('Dispatch it live');
    const dryRuns = tab.calls.filter((call) => call.path === '/control/dispatch-next' && call.body?.includes('"dry_run":true'));
    expect(JSON.parse(dryRuns.at(-1)!.body!)).toMatchObject({ project_id: projectId });
    expect(await preview.innerText()).toMatch(/Route\s+default \(gpu worker\)[\s\S]*Preflight:\s+ready/);
    await tab.screenshot('queue-dispatch-preview');

    // The network loses the first live call's answer: the server dispatched, the browser saw a reset. The preview and
    // its idempotency key stay, so trying again attaches to the run the lost call started; a double click sends one.
    expect(tab.problems).toEqual([]);
    await tab.page.route('**/control/dispatch-next', async (route) => {
      if (!route.request().postData()?.includes('"dry_run":false')) return route.continue();
      await route.fetch();
      await route.abort('connectionreset');
    });
    await dispatch.getByRole('button', { name: 'Dispatch it live' }).click();
    await expect.poll(() => dispatch.getByRole('alert').innerText(), { timeout: 60_000 }).toContain('did not answer');
    expect(await dispatch.locator('.preview').innerText()).toContain(XSS_TITLE);
    await tab.page.unroute('**/control/dispatch-next');
    // The browser reports the dropped connection; it is the only problem so far.
    expect(tab.problems).toEqual([expect.stringContaining('ERR_CONNECTION_RESET')]);
    tab.problems.length = 0;
    const livesBefore = liveCalls('/control/dispatch-next').length;
    await dispatch.getByRole('button', { name: 'Dispatch it live' }).dblclick();
    await expect.poll(() => dispatch.locator('.outcome').innerText(), { timeout: 60_000 }).toContain('live dispatch');
    expect(liveCalls('/control/dispatch-next').length - livesBefore).toBe(1);
    const keys = liveCalls('/control/dispatch-next').map((call) => JSON.parse(call.body!).idempotency_key);
    expect(keys).toHaveLength(2);
    expect(keys[0]).toEqual(expect.any(String));
    expect(keys[1]).toBe(keys[0]);
    expect(liveCalls('/control/dispatch-next').map((call) => JSON.parse(call.body!).project_id)).toEqual([projectId, projectId]);
    // One run started: the only other is the one canceled above.
    const runs: { state: string }[] = (await stack.api('GET', '/control/api/v1/runs')).body.items;
    expect(runs).toHaveLength(2);
    expect(runs.filter((run) => run.state === 'canceled')).toHaveLength(1);
    await expect.poll(() => tab.card('Items').getByRole('tab', { name: /^active/i }).locator('.tab-count').innerText()).toBe('1');

    // Watch it finish on its page: the gate's callbacks arrive, the agent's decision and evidence show.
    await dispatch.locator('.outcome a').first().click();
    const runCard = tab.card('Run');
    await expect.poll(() => runCard.innerText(), { timeout: 120_000, interval: 1000 }).toContain('reconciled');
    await expect.poll(() => tab.card('Decision').innerText()).toContain('finalize positive');
    expect(await tab.card('Callbacks from the worker').locator('tbody tr').count()).toBeGreaterThanOrEqual(2);
    await tab.screenshot('run-detail');

    // Draft the paper: dry run, then live; its draft shows as text. The title's markup was escaped into the Markdown
    // itself (a package carries that file to renderers that would run it), and the dashboard shows that text as it is.
    await tab.open('#/papers');
    const draftNext = tab.card('Draft the next paper');
    await draftNext.getByRole('button', { name: 'Dry run' }).click();
    await expect.poll(() => draftNext.locator('.preview').innerText()).toContain('complete');
    await draftNext.getByRole('button', { name: 'Draft it' }).click();
    await expect.poll(() => draftNext.locator('.outcome').innerText(), { timeout: 60_000 }).toContain('draft review');
    await draftNext.locator('.outcome a').first().click();
    const draft = tab.card('Draft').locator('pre.draft');
    await expect.poll(() => draft.innerText()).toContain(`# ${XSS_TITLE.replaceAll('<', '&lt;')}`);
    expect(await tab.page.locator('main img').count()).toBe(0);
    expect(await inPage(tab.page, 'window.__xss')).toBeUndefined();

    // The checklist: a failed item needs a note (said in place, nothing sent); a person's approval is saved.
    const checklist = tab.card('Checklist');
    const before = tab.calls.length;
    await checklist.getByLabel('novelty significance status').selectOption('fail');
    await checklist.locator('tr', { hasText: 'novelty significance' }).getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => checklist.getByRole('alert').innerText()).toContain('needs a note');
    expect(tab.calls.slice(before).filter((call) => call.method === 'POST')).toEqual([]);
    await checklist.getByLabel('novelty significance status').selectOption('pass');
    await checklist.locator('tr', { hasText: 'novelty significance' }).getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => checklist.locator('[role="status"]').innerText()).toContain('novelty significance: pass');
    await checklist.getByLabel('final human approval status').selectOption('pass');
    await checklist.locator('tr', { hasText: 'final human approval' }).getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => checklist.locator('[role="status"]').innerText()).toContain('final human approval: pass');

    // Finalize: the package's dry run lists its files; the live call writes it and finalizes the review.
    const finalize = tab.card('Finalization package');
    await finalize.getByRole('button', { name: 'Dry run' }).click();
    await expect.poll(() => finalize.locator('.preview').innerText()).toContain('ready');
    await finalize.getByRole('button', { name: 'Write the package and finalize' }).click();
    await expect.poll(() => finalize.locator('.outcome').innerText(), { timeout: 30_000 }).toContain('the review is finalized');
    const corpus = tab.card('Corpus import');
    await expect.poll(() => corpus.getByLabel('Manifest sha256').inputValue()).toMatch(/^[0-9a-f]{64}$/);
    await corpus.getByLabel('Corpus repository').fill('lab/corpus');
    await corpus.getByLabel('Commit').fill('abc1234');
    await corpus.getByRole('button', { name: 'Record the import' }).click();
    await expect.poll(() => corpus.innerText()).toContain('imported into lab/corpus at abc1234');
    await tab.screenshot('paper-detail');

    // A bounded cycle: its dry run reports every stage, the live one runs them.
    await tab.open('#/research');
    const cycle = tab.card('Run a bounded cycle');
    await cycle.getByLabel('max provider requests per run').fill('0');
    await cycle.getByLabel('require budget ok').uncheck();
    await cycle.getByRole('button', { name: 'Dry run' }).click();
    await expect.poll(() => cycle.locator('.preview').innerText()).toContain('dry run research cycle');
    expect(await cycle.getByRole('button', { name: 'Run the cycle' }).isEnabled()).toBe(true);
    await cycle.getByRole('button', { name: 'Run the cycle' }).click();
    // Looking elsewhere while it runs loses nothing: back on the panel, the same command shows its outcome.
    await tab.page.getByRole('link', { name: 'Overview' }).click();
    await tab.card('Operator lanes').waitFor();
    await tab.page.getByRole('link', { name: 'Research Facility' }).click();
    await expect.poll(() => cycle.locator('.outcome').innerText(), { timeout: 60_000 }).toContain('research cycle');
    expect(liveCalls('/control/api/research/run-cycle')).toHaveLength(1);
    expect(await cycle.locator('.outcome tbody tr').count()).toBeGreaterThan(1);
    await tab.screenshot('research-cycle');

    await tab.open('#/overview');
    await expect.poll(() => tab.card('Operator lanes').locator('.lane-card', { hasText: 'Imported' }).locator('.lane-count').innerText()).toBe('1');

    // Every write carried the session's CSRF token; no call carried the control token.
    const { csrf_token: csrf } = await inPage<{ csrf_token: string }>(tab.page, `fetch('/control/api/session').then((response) => response.json())`);
    const writes = tab.calls.filter((call) => call.method !== 'GET' && call.path !== '/control/api/session');
    expect(writes.length).toBeGreaterThan(10);
    for (const write of writes) expect(write.headers['x-csrf-token'], `${write.method} ${write.path}`).toBe(csrf);
    expect(tab.calls.filter((call) => call.headers.authorization)).toEqual([]);
    expect(tab.problems).toEqual([]);
  });

  // Last: the flow above counts the runs it made.
  it('shows on a run\'s page, and in the runs list, why the run ended', { timeout: 60_000 }, async () => {
    const imported = await stack.api('POST', '/control/api/research/import-candidates', {
      requested_by: 'test',
      dry_run: false,
      candidates: [candidate({ title: 'A run whose agent fails', dedupe_key: 'dashboard-cause', hypothesis: 'The agent exits with status 3.', mechanism: 'Fail.' })],
    });
    const candidateId = imported.body.results[0].candidate_id;
    const promoted = await stack.api('POST', '/control/api/research/promote-candidate', { candidate_id: candidateId, dry_run: false, requested_by: 'test', idempotency_key: 'dashboard-cause' });
    const projectId = promoted.body.project_id as string;
    await stack.writeScenario(projectId, { scenario: 'agent-fails' });
    const dispatched = await stack.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'test' });
    expect(dispatched.body).toMatchObject({ action: 'live_dispatch', candidate: { project_id: projectId } });
    stack.agents.remember(dispatched.body);
    const runId = dispatched.body.run_id as string;
    await expect.poll(async () => (await stack.api('GET', `/control/api/v1/runs/${runId}`)).body.run.state, { timeout: 30_000 }).toBe('gate_error');

    await tab.open(`#/runs/${runId}`);
    await expect.poll(() => tab.card('Run').innerText(), { timeout: 15_000 }).toMatch(/Ended by\s+crash · exit 3/);
    await tab.open('#/runs');
    await expect.poll(() => tab.page.locator('tbody tr', { hasText: runId }).innerText(), { timeout: 15_000 }).toContain('crash · exit 3');
  });
});
