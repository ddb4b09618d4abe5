import { appendFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CALLBACK_TOKEN, CONTROL_TOKEN, GATE_TOKEN, waitUntil } from '../support/gate.ts';
import { inPage, launchChromium, openDashboard, type DashboardTab } from '../support/browser.ts';
import { RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';
import { rcpCli, startRcp } from '../support/rcp-cli.ts';

// expected duration: ~60 s

/**
 * Following a run live (docs/runs.md#following-a-run-live): the fake agent says what the test writes for it, the gate
 * pushes each entry to the control plane, stripped of secrets, and the API pages it, the SSE stream follows it from a
 * Last-Event-ID, `rcp runs logs` prints it, and the run page shows it live in Chromium, across a restart of the control
 * plane, with the agent's markup and terminal codes as text.
 */

const PROJECT = 'live-study';
const ESC = '\u001b';

let stack: RunStack;
let runId: string;
let narration: string;

const say = (line: Record<string, unknown>) => appendFile(narration, `${JSON.stringify(line)}\n`);
const transcript = (query = '') => stack.api('GET', `/control/api/v1/runs/${runId}/transcript${query}`);
const texts = async () => ((await transcript('?limit=500')).body.entries as { text: string }[]).map((entry) => entry.text);
const until = (what: string, text: string) => waitUntil(what, async () => ((await texts()).some((said) => said.includes(text)) ? true : undefined), 30_000, 100);

beforeAll(async () => {
  stack = await startRunStack();
  await stack.seed(PROJECT, { projectName: 'Live study', scenario: { scenario: 'narrate' } });
  narration = join(stack.gateFixture.projectRoot, PROJECT, 'narration.jsonl');
  const live = await stack.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'transcript-test', project_id: PROJECT });
  stack.agents.remember(live.body);
  expect(live.status, JSON.stringify(live.body)).toBe(200);
  runId = live.body.run_id;
  await say({ kind: 'message', text: 'I will look at the data first.' });
  await say({ kind: 'tool_call', tool: 'Bash', text: `curl -H "Authorization: Bearer ${GATE_TOKEN}" -d token=${CALLBACK_TOKEN} http://gate; echo $GATE_EVENT_TOKEN` });
  await say({ kind: 'tool_output', tool: 'Bash', text: `${ESC}[2J${ESC}]0;pwned${ESC}\\<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">` });
  await until('the agent\'s first entries', '<script>');
}, RUN_STACK_START_MS);

afterAll(async () => {
  await stack?.close();
});

describe("a run's transcript", () => {
  it('holds the lifecycle and what the agent said, in order, numbered from 1, with every secret of the gate stripped', async () => {
    const answer = await transcript();
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    const { entries } = answer.body;
    expect(entries.map((entry: { seq: number }) => entry.seq)).toEqual(entries.map((_: unknown, index: number) => index + 1));
    expect(entries[0]).toMatchObject({ kind: 'lifecycle', tool: null, text: 'session-start: fake agent started (narrate)' });
    const call = entries.find((entry: { kind: string }) => entry.kind === 'tool_call');
    expect(call).toMatchObject({ tool: 'Bash' });
    expect(call.text).toBe('curl -H "Authorization: Bearer [redacted]" -d token=[redacted] http://gate; echo [redacted]');
    expect(JSON.stringify(entries)).not.toContain(GATE_TOKEN);
    expect(JSON.stringify(entries)).not.toContain(CALLBACK_TOKEN);
    expect(entries.map((entry: { kind: string }) => entry.kind)).toEqual(expect.arrayContaining(['lifecycle', 'message', 'tool_call', 'tool_output']));
  });

  it('pages by seq, and refuses what it cannot answer with clear 4xx', async () => {
    const first = await transcript('?limit=2');
    expect(first.body).toMatchObject({ run_id: runId, next_after: 2, has_more: true });
    expect(first.body.entries).toHaveLength(2);
    const next = await transcript(`?after=${first.body.next_after}&limit=500`);
    expect(next.body.entries[0].seq).toBe(3);
    expect(next.body.has_more).toBe(false);
    expect((await stack.api('GET', '/control/api/v1/runs/no-such-run/transcript')).status).toBe(404);
    expect((await stack.api('GET', '/control/api/v1/runs/no-such-run/transcript/stream')).status).toBe(404);
    expect((await transcript('?after=-1')).status).toBe(422);
    expect((await transcript('?limit=0')).status).toBe(422);

    const push = (body: unknown, token = CALLBACK_TOKEN) =>
      fetch(`${stack.cpFixture.url}/control/api/worker-transcript`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const entry = { seq: 1, at: new Date().toISOString(), kind: 'message', tool: null, text: 'x' };
    expect((await push({ run_id: runId, entries: [entry] }, CONTROL_TOKEN)).status).toBe(401);
    expect((await push({ run_id: 'no-such-run', entries: [entry] })).status).toBe(404);
    expect((await push({ run_id: runId, entries: [{ ...entry, kind: 'shell' }] })).status).toBe(422);
    // A redelivery of an entry already held changes nothing, and says how far the run is held.
    const again = await push({ run_id: runId, entries: [{ ...entry, text: 'not the first text' }] });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { stored_through: number }).stored_through).toBeGreaterThanOrEqual(4);
    expect((await transcript('?limit=1')).body.entries[0].text).toBe('session-start: fake agent started (narrate)');
  });

  it('streams as server-sent events from the Last-Event-ID a client reconnects with', async () => {
    const controller = new AbortController();
    const response = await fetch(`${stack.cpFixture.url}/control/api/v1/runs/${runId}/transcript/stream`, {
      headers: { authorization: `Bearer ${CONTROL_TOKEN}`, 'last-event-id': '2' },
      signal: controller.signal,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    let received = '';
    const decoder = new TextDecoder();
    const reading = (async () => {
      for await (const chunk of response.body!) received += decoder.decode(chunk as Uint8Array, { stream: true });
    })().catch(() => undefined);
    await say({ kind: 'message', text: 'streamed while watched' });
    await waitUntil('the new entry on the stream', () => (received.includes('streamed while watched') ? true : undefined), 15_000, 50);
    controller.abort();
    await reading;
    const ids = [...received.matchAll(/^id: (\d+)$/gm)].map((match) => Number(match[1]));
    expect(ids[0]).toBe(3);
    expect(ids).toEqual(ids.map((_, index) => index + 3));
    expect(received).toMatch(/^event: state\ndata: \{"run_state":"running"\}$/m);
    // The agent's escape codes travel as JSON escapes, never raw.
    expect(received).not.toContain(ESC);
  });

  it('shows live on the run page at 1440 and 390 px, as text, and picks up where it left off after the control plane restarts', { timeout: 150_000 }, async () => {
    const browser = await launchChromium();
    const shown = (tab: DashboardTab) => tab.card('Transcript').locator('li.transcript-entry');
    const seqs = async (tab: DashboardTab) => (await shown(tab).evaluateAll((items) => items.map((item) => Number(item.getAttribute('data-seq')))));
    try {
      const tabs: DashboardTab[] = [];
      for (const width of [1440, 390]) {
        const tab = await openDashboard(browser, stack.cpFixture.url, { viewport: { width, height: 900 } });
        await tab.signIn(CONTROL_TOKEN);
        await tab.open(`#/runs/${encodeURIComponent(runId)}`);
        await expect.poll(() => shown(tab).count(), { timeout: 15_000 }).toBeGreaterThanOrEqual(5);
        tabs.push(tab);
      }
      const [wide, narrow] = tabs as [DashboardTab, DashboardTab];
      await say({ kind: 'tool_call', tool: 'Bash', text: 'python train.py --epochs 3' });
      for (const tab of tabs) await expect.poll(() => shown(tab).last().innerText(), { timeout: 15_000 }).toContain('python train.py --epochs 3');
      const output = wide.card('Transcript').locator('li.transcript-tool_output pre').first();
      expect(await output.innerText()).toContain('<script>window.__xss = 1</script>');
      expect(await wide.card('Transcript').locator('script, img').count()).toBe(0);
      expect(await inPage(wide.page, 'window.__xss')).toBeUndefined();
      expect(await narrow.page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);

      // The control plane goes away; the agent goes on; the page reconnects and shows the rest once, in order.
      await stack.cp.kill('SIGTERM');
      await say({ kind: 'message', text: 'said while the control plane was down' });
      await stack.restartControlPlane();
      await say({ kind: 'message', text: 'said after it came back' });
      for (const tab of tabs) {
        await expect.poll(() => shown(tab).last().innerText(), { timeout: 60_000 }).toContain('said after it came back');
        const held = await seqs(tab);
        expect(held).toEqual(held.map((_, index) => index + 1));
        expect(await tab.card('Transcript').innerText()).toContain('said while the control plane was down');
      }
      for (const tab of tabs) {
        expect(tab.problems.filter((problem) => !/transcript\/stream|ERR_CONNECTION_REFUSED|ERR_INCOMPLETE_CHUNKED_ENCODING/.test(problem))).toEqual([]);
        await tab.screenshot(`run-transcript-${tab === wide ? 1440 : 390}`);
      }
    } finally {
      await browser.close();
    }
  });

  it('prints in rcp runs logs, terminal-safe, and --follow goes on until the run ends', { timeout: 90_000 }, async () => {
    const control = { url: stack.cpFixture.url, token: CONTROL_TOKEN };
    const printed = await rcpCli(['runs', 'logs', runId], control);
    expect(printed.code, printed.stderr).toBe(0);
    const text = printed.stdout.toString();
    expect(text).toMatch(/^\d\d:\d\d:\d\d {2}lifecycle {4}session-start: fake agent started \(narrate\)$/m);
    expect(text).toMatch(/tool_call {3}Bash {2}python train.py --epochs 3$/m);
    expect(text).not.toContain(ESC);
    expect(text).toContain('\\u001b[2J');

    const follow = startRcp(['runs', 'logs', runId, '--follow', '--json'], control);
    let out = '';
    let err = '';
    follow.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    follow.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const exited = new Promise<number | null>((done) => follow.once('exit', (code) => done(code)));
    await waitUntil(`rcp to print the backlog (stderr: ${err})`, () => (out.includes('said after it came back') ? true : undefined), 20_000, 100);
    await say({ kind: 'message', text: 'the last words' });
    await say({ end: true });
    await waitUntil('rcp to print the last words', () => (out.includes('the last words') ? true : undefined), 20_000, 100);
    expect(await exited, err).toBe(0);
    const lines = out.trim().split('\n').map((line) => JSON.parse(line) as { seq: number; text: string });
    expect(lines.map((entry) => entry.seq)).toEqual(lines.map((_, index) => index + 1));
    expect(lines.map((entry) => entry.text)).toContain('session-end: fake agent finished (narrate)');
  });
});
