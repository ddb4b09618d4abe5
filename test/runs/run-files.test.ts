import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { link, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_TOKEN, gateClient, waitUntil } from '../support/gate.ts';
import { inPage, launchChromium, openDashboard } from '../support/browser.ts';
import { RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';
import { rcpCli } from '../support/rcp-cli.ts';

// expected duration: ~30 s

/**
 * A run's result files (GET /control/api/v1/runs/{run_id}/files and /files/content, the gate's own routes, `rcp runs
 * files` and `rcp runs cat`, the run page): listed with sizes and hashes, previewed within caps, and never run. The
 * agent (the fake one, then the test in its place) leaves Markdown holding markup, a large log, images, and links and
 * odd files that must not be served.
 */

const PROJECT = 'files-study';
const NOTES = [
  '# Run notes',
  '<script>window.__xss = 1</script>',
  '<img src="x" onerror="window.__xss = 2">',
  'The loss went **down**, see [the plot](javascript:window.__xss=3) and [the paper](https://example.org/paper).',
  '',
  '| metric | value |',
  '|---|---|',
  '| accuracy | 0.93 |',
  '',
].join('\n');
// A 1×1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');
const SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10"><script>window.__xss = 4</script><rect width="20" height="10" fill="teal"/></svg>';
const BIG_LOG = 'step loss\n'.repeat(40_000);
const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

let stack: RunStack;
let runId: string;
let projectDir: string;
let outside: string;

beforeAll(async () => {
  stack = await startRunStack();
  await stack.seed(PROJECT, { projectName: 'Files study', scenario: { scenario: 'normal', work_sec: 0, results: { accuracy: 0.93 } } });
  const live = await stack.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'files-test', project_id: PROJECT });
  stack.agents.remember(live.body);
  expect(live.status, JSON.stringify(live.body)).toBe(200);
  runId = live.body.run_id;
  projectDir = join(stack.gateFixture.projectRoot, PROJECT);
  await waitUntil('the fake agent to write its results', async () => existsSync(join(projectDir, 'results', 'main', 'metrics.json')) || undefined, 30_000, 100);
  // What the agent leaves besides: the notes with markup, plots, a large log, and what must not be served.
  outside = await mkdtemp(join(tmpdir(), 'rcp-files-outside-'));
  await writeFile(join(outside, 'secret.txt'), 'a secret of the worker\n');
  await writeFile(join(projectDir, 'run_notes.md'), NOTES);
  await mkdir(join(projectDir, 'results', 'plots'), { recursive: true });
  await writeFile(join(projectDir, 'results', 'plots', 'loss.png'), PNG);
  await writeFile(join(projectDir, 'results', 'plots', 'shape.svg'), SVG);
  await writeFile(join(projectDir, 'results', 'plots', 'huge.png'), Buffer.alloc(3 * 1024 * 1024));
  await writeFile(join(projectDir, 'results', 'train.log'), BIG_LOG);
  await writeFile(join(projectDir, 'results', 'weights.bin'), Buffer.from([0, 1, 2, 3]));
  await symlink(join(outside, 'secret.txt'), join(projectDir, 'results', 'linked.txt'));
  await link(join(outside, 'secret.txt'), join(projectDir, 'results', 'hard.txt'));
  await writeFile(join(projectDir, 'credentials.txt'), 'not a result\n');
}, RUN_STACK_START_MS);

afterAll(async () => {
  await stack?.close();
  if (outside) await rm(outside, { recursive: true, force: true });
});

const files = () => stack.api('GET', `/control/api/v1/runs/${runId}/files`);
const content = (path: string) => stack.api('GET', `/control/api/v1/runs/${runId}/files/content?path=${encodeURIComponent(path)}`);

describe("a run's result files", () => {
  it('are listed with sizes and SHA-256, the notes, the decision and results/ only; links and hard links are refused', async () => {
    const answer = await files();
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    const byPath = Object.fromEntries(answer.body.files.map((file: { path: string }) => [file.path, file]));
    expect(Object.keys(byPath).sort()).toEqual(
      ['.research/decision.json', 'results/main/metrics.json', 'results/plots/huge.png', 'results/plots/loss.png', 'results/plots/shape.svg', 'results/train.log', 'results/weights.bin', 'run_notes.md'].sort(),
    );
    expect(byPath['run_notes.md']).toEqual({ path: 'run_notes.md', size: Buffer.byteLength(NOTES), sha256: sha256(NOTES), media_type: 'text/markdown', preview: 'markdown' });
    expect(byPath['results/plots/loss.png']).toMatchObject({ size: PNG.length, sha256: sha256(PNG), media_type: 'image/png', preview: 'image' });
    expect(byPath['results/train.log']).toMatchObject({ size: BIG_LOG.length, sha256: sha256(BIG_LOG), preview: 'text' });
    expect(byPath['results/weights.bin']).toMatchObject({ media_type: 'application/octet-stream', preview: 'none' });
    expect(answer.body.refused.map((refused: { path: string }) => refused.path).sort()).toEqual(['results/hard.txt', 'results/linked.txt']);
    expect(JSON.stringify(answer.body)).not.toContain('a secret of the worker');
    // The same list from the gate itself, with its own token.
    const onGate = await gateClient(stack.gateFixture).call('GET', `/runs/${runId}/files`);
    expect(onGate.status).toBe(200);
    expect(onGate.body.files).toEqual(answer.body.files);
  });

  it('preview text whole up to 256 KiB and cut past it, an image whole, and nothing of a file outside the results', async () => {
    const notes = await content('run_notes.md');
    expect(notes.body).toMatchObject({ encoding: 'utf8', content: NOTES, truncated: false, sha256: sha256(NOTES) });
    const log = await content('results/train.log');
    expect(log.body).toMatchObject({ truncated: true, size: BIG_LOG.length, sha256: sha256(BIG_LOG) });
    expect(log.body.content).toBe(BIG_LOG.slice(0, 256 * 1024));
    const png = await content('results/plots/loss.png');
    expect(png.body).toMatchObject({ encoding: 'base64', content: PNG.toString('base64'), truncated: false });
    const huge = await content('results/plots/huge.png');
    expect(huge.body).toMatchObject({ encoding: 'base64', content: null, truncated: true, size: 3 * 1024 * 1024 });

    expect((await content('credentials.txt')).status).toBe(404);
    expect((await content('results/../credentials.txt')).status).toBe(400);
    expect((await content('results/linked.txt')).status).toBe(409);
    expect((await content('results/missing.json')).status).toBe(404);
    expect((await stack.api('GET', '/control/api/v1/runs/no-such-run/files')).status).toBe(404);
  });

  it('print in rcp runs files and rcp runs cat: text as text, an image\'s bytes to a pipe', { timeout: 60_000 }, async () => {
    const control = { url: stack.cpFixture.url, token: CONTROL_TOKEN };
    const [listed, notes, png, log] = await Promise.all([
      rcpCli(['runs', 'files', runId], control),
      rcpCli(['runs', 'cat', runId, 'run_notes.md'], control),
      rcpCli(['runs', 'cat', runId, 'results/plots/loss.png'], control),
      rcpCli(['runs', 'cat', runId, 'results/train.log'], control),
    ]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout.toString()).toMatch(new RegExp(`^results/plots/loss\\.png +${PNG.length} +${sha256(PNG)} +image$`, 'm'));
    expect(listed.stdout.toString()).toContain('not listed: results/linked.txt');
    expect(notes.stdout.toString()).toBe(NOTES);
    expect(png.stdout.equals(PNG)).toBe(true);
    expect(log.stderr).toContain(`the file has ${BIG_LOG.length} bytes, and only its beginning is shown`);
  });

  it('show on the run page at 1440 and 390 px: Markdown whose markup stays text, a capped log, an image', { timeout: 90_000 }, async () => {
    const browser = await launchChromium();
    try {
      for (const width of [1440, 390]) {
        const tab = await openDashboard(browser, stack.cpFixture.url, { viewport: { width, height: 900 } });
        await tab.signIn(CONTROL_TOKEN);
        await tab.open(`#/runs/${encodeURIComponent(runId)}`);
        const results = tab.card('Result files');
        await results.getByRole('button', { name: 'List the result files' }).click();
        await results.locator('tbody tr').first().waitFor();
        expect(await results.locator('tbody tr').count()).toBe(8);

        await results.locator('[data-key="preview-run_notes.md"]').click();
        const notes = results.locator('.file-preview .markdown');
        await notes.waitFor();
        expect(await notes.locator('h3').innerText()).toBe('Run notes');
        expect(await notes.innerText()).toContain('<script>window.__xss = 1</script>');
        expect(await notes.locator('strong').innerText()).toBe('down');
        expect(await notes.locator('a', { hasText: 'the paper' }).getAttribute('href')).toBe('https://example.org/paper');
        expect(await notes.locator('a', { hasText: 'the plot' }).getAttribute('href')).toBe('#');
        expect(await notes.locator('td').allInnerTexts()).toEqual(['accuracy', '0.93']);
        expect(await results.locator('.file-preview img').count()).toBe(0);

        await results.locator('[data-key="preview-results/train.log"]').click();
        await expect.poll(() => results.locator('.file-preview .notice').innerText()).toContain('Only the beginning is shown');

        for (const image of ['results/plots/loss.png', 'results/plots/shape.svg']) {
          await results.locator(`[data-key="preview-${image}"]`).click();
          const shown = results.locator('.file-preview img.file-image');
          await shown.waitFor();
          await expect.poll(() => shown.evaluate((img: any) => (img.complete ? img.naturalWidth : 0))).toBeGreaterThan(0);
          expect(await shown.getAttribute('src')).toMatch(/^blob:/);
        }
        await results.locator('[data-key="preview-results/plots/huge.png"]').click();
        await expect.poll(() => results.locator('.file-preview').innerText()).toContain('Too large to preview');

        expect(await inPage(tab.page, 'window.__xss')).toBeUndefined();
        if (width === 390) expect(await tab.page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
        expect(tab.problems).toEqual([]);
        await tab.screenshot(`run-files-${width}`);
        await tab.page.context().close();
      }
    } finally {
      await browser.close();
    }
  });
});

describe('the result files of a gate that never held the run', () => {
  it('answers 404', async () => {
    const answer = await gateClient(stack.gateFixture).call('GET', '/runs/files-never-here/files');
    expect(answer.status).toBe(404);
    expect(await readFile(join(projectDir, 'credentials.txt'), 'utf8')).toBe('not a result\n');
  });
});
