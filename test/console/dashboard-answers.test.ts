import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import type { RunLauncher } from '../../capabilities/runs/run-launcher.ts';
import type { ResumeNow, RunAnswer } from '../../workflows/runs/run-messages.ts';
import { startTestApp, TEST_TOKEN, UNREACHABLE_TEMPORAL, type TestApp } from '../support/app.ts';
import { inPage, launchChromium, openDashboard, seriousAccessibilityViolations, type DashboardTab } from '../support/browser.ts';

// expected duration: ~30 s

/**
 * The operator answers the agent from the run page, in Chromium against the real HTTP app: three runs wait on their
 * agent's question (one with choices, one for a permission, one in words), each with its item in flight and flagged.
 * What the agent wrote is shown as text, the answer posted is the one chosen, a retry after an error sends the same
 * idempotency key, and a refusal is shown with the API's words. The run workflows are a stand-in that records what
 * each answer delivers and answers as a test sets it: delivered, closed (the workflow ended: 409), or unreachable.
 */

/** Text that would run script if it reached the HTML parser. */
const PROBE = '<img src=x onerror="window.__xss=1">';
const STAMP = '20261201T090000Z';
const CHOICE_RUN = `choice-${STAMP}`;
const PERMISSION_RUN = `permission-${STAMP}`;
const WORDS_RUN = `words-${STAMP}`;
const LIMITED_RUN = `limited-${STAMP}`;
const LIMIT = { resets_at: '2026-12-01T13:00:00.000Z', resumes_at: '2026-12-01T13:00:05.000Z' };

const CHOICE_DETAIL = {
  kind: 'question',
  questions: [
    {
      header: `Baseline ${PROBE}`,
      question: `Which baseline should the ablation compare against? ${PROBE}`,
      options: [
        { label: 'ResNet-50', description: 'the baseline of the original paper' },
        { label: `ViT-B/16 ${PROBE}`, description: null },
      ],
    },
  ],
};
const COMMAND = 'rm -rf build && npm test';
const PERMISSION_DETAIL = { kind: 'permission', tool_name: 'Bash', tool_input: { command: COMMAND, description: `Rebuild and test ${PROBE}` } };
const WORDS_QUESTION = `How many seeds should each configuration run? ${PROBE}`;

let delivery: 'delivered' | 'closed' | 'unreachable' = 'delivered';
const delivered: { run_id: string; answer: RunAnswer }[] = [];
const resumesDelivered: { run_id: string; request: ResumeNow }[] = [];
const runs: RunLauncher = {
  ...UNREACHABLE_TEMPORAL,
  async deliverResumeNow(runId, request) {
    resumesDelivered.push({ run_id: runId, request });
    return 'delivered';
  },
  async deliverAnswer(runId, answer) {
    if (delivery === 'unreachable') throw new Error('Temporal did not answer');
    delivered.push({ run_id: runId, answer });
    return delivery;
  },
};

let t: TestApp;
let url: string;
let browser: Browser;

/** A run whose agent asked (a `question_asked` transition), its item running on its own lane and flagged. */
async function seedWaitingRun(runId: string, projectId: string, question: string, detail: object | null): Promise<void> {
  await t.store.transaction(async (tx) => {
    await insertProject(tx, { project_id: projectId, project_name: `Project ${projectId}`, project_dir: projectId, workload_class: 'unknown' });
    await insertQueueItem(tx, { project_id: projectId, project_name: `Project ${projectId}`, status: 'running', manual_review_required: true, lane: `lane-${projectId}` });
    await tx.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, question, question_detail)
       VALUES ($1, $2, $3, 'question_pending', $4, 'http://127.0.0.1:9', 'unknown', 'test', $5, $6::jsonb)`,
      [runId, projectId, `run:${runId}`, `lane-${projectId}`, question, detail ? JSON.stringify(detail) : null],
    );
    await tx.query(
      `INSERT INTO run_transitions (run_id, transition, occurrence, from_state, to_state, queue_status)
       VALUES ($1, 'question_asked', 1, 'running', 'question_pending', 'running')`,
      [runId],
    );
    await tx.query('UPDATE queue_items SET current_run_id = $1 WHERE project_id = $2', [runId, projectId]);
  });
}

/** A run waiting out the model's usage limit (a `usage_limited` transition), its item running, not flagged. */
async function seedLimitedRun(runId: string, projectId: string): Promise<void> {
  await t.store.transaction(async (tx) => {
    await insertProject(tx, { project_id: projectId, project_name: `Project ${projectId}`, project_dir: projectId, workload_class: 'unknown' });
    await insertQueueItem(tx, { project_id: projectId, project_name: `Project ${projectId}`, status: 'running', lane: `lane-${projectId}` });
    await tx.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, usage_limit)
       VALUES ($1, $2, $3, 'usage_limited', $4, 'http://127.0.0.1:9', 'unknown', 'test', $5::jsonb)`,
      [runId, projectId, `run:${runId}`, `lane-${projectId}`, JSON.stringify(LIMIT)],
    );
    await tx.query(
      `INSERT INTO run_transitions (run_id, transition, occurrence, from_state, to_state, queue_status)
       VALUES ($1, 'usage_limited', 1, 'running', 'usage_limited', 'running')`,
      [runId],
    );
    await tx.query('UPDATE queue_items SET current_run_id = $1 WHERE project_id = $2', [runId, projectId]);
  });
}

beforeAll(async () => {
  t = await startTestApp({ runs });
  await seedLimitedRun(LIMITED_RUN, 'limited');
  await seedWaitingRun(CHOICE_RUN, 'choice', CHOICE_DETAIL.questions.map((question) => question.question).join('\n'), CHOICE_DETAIL);
  await seedWaitingRun(PERMISSION_RUN, 'permission', `permission for Bash: ${JSON.stringify(PERMISSION_DETAIL.tool_input)}`, PERMISSION_DETAIL);
  await seedWaitingRun(WORDS_RUN, 'words', WORDS_QUESTION, null);
  [url, browser] = await Promise.all([t.app.listen({ port: 0, host: '127.0.0.1' }), launchChromium()]);
});

beforeEach(() => {
  delivery = 'delivered';
});

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

/** A signed-in tab of `width` px. */
async function signedIn(width: number, options: { bypassCSP?: boolean } = {}): Promise<DashboardTab> {
  const tab = await openDashboard(browser, url, { viewport: { width, height: 900 }, ...options });
  await tab.signIn(TEST_TOKEN);
  return tab;
}

/** The answers the page posted for `runId`, their bodies parsed. */
const answersPosted = (tab: DashboardTab, runId: string) =>
  tab.calls.filter((call) => call.method === 'POST' && call.path === `/control/api/v1/runs/${runId}/answer`).map((call) => JSON.parse(call.body ?? 'null'));

/** Nothing the agent wrote became markup: no image element, and the probe's handler never ran. */
async function expectNoMarkup(tab: DashboardTab): Promise<void> {
  expect(await tab.page.locator('main img').count()).toBe(0);
  expect(await inPage(tab.page, 'window.__xss ?? null')).toBeNull();
}

/** The page is no wider than its viewport: nothing on it spills sideways. */
const pageWidth = (tab: DashboardTab) => inPage<{ page: number; viewport: number }>(tab.page, '({ page: document.documentElement.scrollWidth, viewport: window.innerWidth })');

describe("the run page shows the agent's question", () => {
  it('with its header, text and options as text, at 1440 px and at 390 px, and passes axe-core', { timeout: 60_000 }, async () => {
    for (const width of [1440, 390]) {
      const tab = await signedIn(width, { bypassCSP: width === 1440 });
      try {
        await tab.open(`#/runs/${CHOICE_RUN}`);
        const card = tab.card('Question');
        await expect.poll(() => card.innerText()).toContain('waiting for an answer');
        const text = await card.innerText();
        expect(text).toContain(CHOICE_DETAIL.questions[0]!.header);
        expect(text).toContain(CHOICE_DETAIL.questions[0]!.question);
        expect(text).toContain('the baseline of the original paper');
        expect(await card.getByRole('group', { name: CHOICE_DETAIL.questions[0]!.header }).count()).toBe(1);
        expect(await card.getByRole('radio').count()).toBe(2);
        expect(await card.getByRole('radio', { name: /ResNet-50/ }).count()).toBe(1);
        expect(await card.getByRole('radio', { name: new RegExp(`ViT-B/16 ${PROBE.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`) }).count()).toBe(1);
        expect(await card.getByLabel('Answer', { exact: true }).getAttribute('maxlength')).toBe('8000');
        expect(await card.getByLabel('Note with the choice (optional)').getAttribute('maxlength')).toBe('2000');
        await expectNoMarkup(tab);
        expect(await pageWidth(tab)).toEqual({ page: width, viewport: width });
        if (width === 1440) expect(await seriousAccessibilityViolations(tab.page)).toEqual([]);
        await tab.screenshot(`run-question-${width}`);
        expect(tab.problems).toEqual([]);
      } finally {
        await tab.close();
      }
    }
  });

  it("for a permission: the tool, its arguments as text, what allowing it would do, and the three decisions", { timeout: 60_000 }, async () => {
    for (const width of [1440, 390]) {
      const tab = await signedIn(width, { bypassCSP: width === 1440 });
      try {
        await tab.open(`#/runs/${PERMISSION_RUN}`);
        const card = tab.card('Question');
        await expect.poll(() => card.innerText()).toContain('waiting for an answer');
        expect(await card.locator('dd code').first().innerText()).toBe('Bash');
        expect(JSON.parse(await card.locator('pre code').innerText())).toEqual(PERMISSION_DETAIL.tool_input);
        expect(await card.innerText()).toContain(`runs the shell command \`${COMMAND}\` in the run's project`);
        for (const name of ['Allow once', 'Allow for the rest of the run', 'Deny']) expect(await card.getByRole('button', { name, exact: true }).count(), name).toBe(1);
        expect(await card.getByLabel('Note for the agent (optional)').getAttribute('maxlength')).toBe('2000');
        await expectNoMarkup(tab);
        expect(await pageWidth(tab)).toEqual({ page: width, viewport: width });
        if (width === 1440) expect(await seriousAccessibilityViolations(tab.page)).toEqual([]);
        await tab.screenshot(`run-permission-${width}`);
        expect(tab.problems).toEqual([]);
      } finally {
        await tab.close();
      }
    }
  });

  it("links the overview's agent question to the run page", { timeout: 30_000 }, async () => {
    const tab = await signedIn(1440);
    try {
      await tab.open('#/overview');
      const row = tab.card('What needs a person').locator('tr', { hasText: 'Project choice' });
      await expect.poll(() => row.count()).toBe(1);
      expect(await row.innerText()).toContain('agent question');
      expect(await row.getByRole('link', { name: 'answer the agent on its run' }).getAttribute('href')).toBe(`#/runs/${CHOICE_RUN}`);
      // The question itself, as text: the probe in it builds no element.
      expect(await row.innerText()).toContain(`The agent asks: Which baseline should the ablation compare against? ${PROBE}`);
      expect(await row.locator('img').count()).toBe(0);
      expect(tab.problems).toEqual([]);
    } finally {
      await tab.close();
    }
  });
});

describe('answering from the run page', () => {
  it('sends the chosen option with its note, and a retry after an error sends the same key', { timeout: 60_000 }, async () => {
    const tab = await signedIn(1440);
    try {
      await tab.open(`#/runs/${CHOICE_RUN}`);
      const card = tab.card('Question');
      await card.getByRole('button', { name: 'Send the choice' }).click();
      await expect.poll(() => card.locator('.answer-output').innerText()).toContain('Pick one of the options first.');
      expect(answersPosted(tab, CHOICE_RUN)).toEqual([]);

      await card.getByRole('radio', { name: /ResNet-50/ }).check();
      await card.getByLabel('Note with the choice (optional)').fill('  Use the numbers of its table 2.  ');
      // The answer is recorded, then its workflow cannot be told: the page says so, and offers the same answer again.
      delivery = 'unreachable';
      await card.getByRole('button', { name: 'Send the choice' }).click();
      const output = tab.page.locator('main .answer-output');
      await expect.poll(() => output.innerText()).toContain('Sending the answer failed (HTTP 500)');
      delivery = 'delivered';
      await tab.page.getByRole('button', { name: 'Send the answer again' }).click();
      await expect.poll(() => output.innerText()).toContain("Answer 1 sent (an earlier try had recorded it): the agent's session resumes with it.");

      const posted = answersPosted(tab, CHOICE_RUN);
      expect(posted).toHaveLength(2);
      expect(posted[0]).toEqual({ requested_by: 'dashboard', idempotency_key: expect.stringMatching(/^dashboard-/), choice: 'ResNet-50', note: 'Use the numbers of its table 2.' });
      expect(posted[1]).toEqual(posted[0]);
      expect(delivered.filter((entry) => entry.run_id === CHOICE_RUN)).toEqual([
        { run_id: CHOICE_RUN, answer: { answer_number: 1, prompt: expect.stringContaining('Answer: ResNet-50'), allowed_tools: [] } },
      ]);

      // The question has its answer: no form is left, the retry goes, and the answer is listed.
      await expect.poll(() => tab.card('Question').innerText()).toContain('Answer 1 was recorded');
      expect(await tab.card('Question').getByRole('radio').count()).toBe(0);
      expect(await tab.page.getByRole('button', { name: 'Send the answer again' }).count()).toBe(0);
      const answers = tab.card('Answers');
      await expect.poll(() => answers.innerText()).toContain('Chose “ResNet-50”');
      expect(await answers.innerText()).toContain('Note: Use the numbers of its table 2.');
      expect(await answers.innerText()).toContain('dashboard');
      await expectNoMarkup(tab);
      expect(tab.problems.filter((problem) => !problem.includes('500'))).toEqual([]);
    } finally {
      await tab.close();
    }
  });

  it("answers in words at 390 px, refusing an empty answer before it posts", { timeout: 60_000 }, async () => {
    const tab = await signedIn(390);
    try {
      await tab.open(`#/runs/${WORDS_RUN}`);
      const card = tab.card('Question');
      await expect.poll(() => card.innerText()).toContain(WORDS_QUESTION);
      expect(await card.getByRole('radio').count()).toBe(0);
      await card.getByRole('button', { name: 'Send the answer' }).click();
      await expect.poll(() => card.locator('.answer-output').innerText()).toContain('Write the answer first.');
      expect(answersPosted(tab, WORDS_RUN)).toEqual([]);

      await card.getByLabel('Answer', { exact: true }).fill('Three seeds each: 0, 1 and 2.');
      await card.getByRole('button', { name: 'Send the answer' }).click();
      await expect.poll(() => tab.page.locator('main .answer-output').innerText()).toContain("Answer 1 sent: the agent's session resumes with it.");
      expect(answersPosted(tab, WORDS_RUN)).toEqual([{ requested_by: 'dashboard', idempotency_key: expect.stringMatching(/^dashboard-/), answer: 'Three seeds each: 0, 1 and 2.' }]);
      await expect.poll(() => tab.card('Answers').innerText()).toContain('Three seeds each: 0, 1 and 2.');
      await expectNoMarkup(tab);
      expect(await pageWidth(tab)).toEqual({ page: 390, viewport: 390 });
      expect(tab.problems).toEqual([]);
    } finally {
      await tab.close();
    }
  });

  it("allows a permission for the rest of the run, and shows the API's 409 when the run's workflow has ended", { timeout: 60_000 }, async () => {
    const tab = await signedIn(390);
    try {
      await tab.open(`#/runs/${PERMISSION_RUN}`);
      const card = tab.card('Question');
      await card.getByLabel('Note for the agent (optional)').fill('Only inside the project.');
      delivery = 'closed';
      await card.getByRole('button', { name: 'Allow for the rest of the run' }).click();
      const output = tab.page.locator('main .answer-output');
      await expect.poll(() => output.innerText()).toContain('Sending the answer failed (HTTP 409)');
      expect(await output.innerText()).toContain('its workflow has ended');
      // A refusal would only repeat: no retry is offered.
      await expect.poll(() => tab.card('Question').innerText()).toContain('Answer 1 was recorded');
      expect(await tab.page.getByRole('button', { name: 'Send the answer again' }).count()).toBe(0);
      expect(answersPosted(tab, PERMISSION_RUN)).toEqual([
        { requested_by: 'dashboard', idempotency_key: expect.stringMatching(/^dashboard-/), permission: 'allow_for_run', note: 'Only inside the project.' },
      ]);
      // The answer was recorded before the workflow turned out to have ended: the page lists it, with the tool it allows.
      const answers = tab.card('Answers');
      await expect.poll(() => answers.innerText()).toContain('allow for run');
      expect(await answers.innerText()).toContain('Bash (for the run)');
      expect(await pageWidth(tab)).toEqual({ page: 390, viewport: 390 });
      expect(tab.problems.filter((problem) => !problem.includes('409'))).toEqual([]);
    } finally {
      await tab.close();
    }
  });
});

describe('the run page shows a usage-limit wait', () => {
  it('with when the run resumes, and a Resume now that asks once per limit', { timeout: 60_000 }, async () => {
    const tab = await signedIn(390);
    try {
      await tab.open(`#/runs/${LIMITED_RUN}`);
      const card = tab.card('Usage limit');
      await expect.poll(() => card.innerText()).toContain('waiting for the limit');
      expect(await pageWidth(tab)).toEqual({ page: 390, viewport: 390 });
      const button = card.getByRole('button', { name: 'Resume now' });
      await button.click();
      await expect.poll(() => tab.card('Usage limit').innerText()).toContain('Resume requested');
      await tab.card('Usage limit').getByRole('button', { name: 'Resume now' }).click();
      await expect.poll(() => resumesDelivered.length).toBe(2);
      const posted = tab.calls.filter((call) => call.method === 'POST' && call.path === `/control/api/v1/runs/${LIMITED_RUN}/resume`).map((call) => JSON.parse(call.body ?? 'null'));
      expect(posted).toHaveLength(2);
      // The same limit, the same key: the API answers the first request again instead of recording a second.
      expect(posted[1].idempotency_key).toBe(posted[0].idempotency_key);
      expect(resumesDelivered.map((sent) => sent.request)).toEqual([
        { limit_number: 1, requested_by: posted[0].requested_by },
        { limit_number: 1, requested_by: posted[0].requested_by },
      ]);
      expect(await t.store.query("SELECT 1 FROM audit_events WHERE entity_id = $1 AND event_type = 'run.resume_requested'", [LIMITED_RUN]).then((result) => result.rows.length)).toBe(1);
      expect(tab.problems).toEqual([]);
    } finally {
      await tab.close();
    }
  });
});
