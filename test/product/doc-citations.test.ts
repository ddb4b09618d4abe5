import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { anchorsOf, bareReadmeCitations, brokenCitations, citationsIn, headingSlug, headingsOf, type Citation } from '../support/doc-citations.ts';

/**
 * Every citation of the documentation names a file and a heading that exist: in the code, scripts, config files and
 * pages of the repository (every file git knows of, committed or not), and in the OpenAPI document the server
 * publishes. A citation is `docs/<page>.md#<anchor>` or `README.md#<anchor>` from the root, or a relative markdown
 * link between pages.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Applied migrations are checksummed and append-only: their comments keep the old form (the word README and a quoted
// heading), and the heading each names must still be one of the documentation's.
const FROZEN = /^store\/migrations\//;

function repositoryTextFiles(): { file: string; text: string }[] {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
  return [...new Set(listed.split('\0').filter(Boolean))]
    .filter((file) => existsSync(join(ROOT, file)))
    .flatMap((file) => {
      const bytes = readFileSync(join(ROOT, file));
      return bytes.includes(0) ? [] : [{ file, text: bytes.toString('utf8') }];
    });
}

function documentationHeadings(): Set<string> {
  const pages = repositoryTextFiles().filter(({ file }) => file === 'README.md' || /^docs\/[\w-]+\.md$/.test(file));
  return new Set(pages.flatMap(({ text }) => headingsOf(text)));
}

let t: TestApp;
let openApi: string;
beforeAll(async () => {
  t = await startTestApp({}, { workerGate: true });
  const response = await t.app.inject({ method: 'GET', url: '/control/api/openapi.json', headers: t.auth });
  expect(response.statusCode).toBe(200);
  openApi = response.body;
});
afterAll(async () => t.close());

describe('citations of the documentation', () => {
  it('computes anchors as GitHub does', () => {
    expect(headingSlug("rcp, the command line")).toBe('rcp-the-command-line');
    expect(headingSlug("The agent's sandbox")).toBe('the-agents-sandbox');
    expect(headingSlug('Follow-ups')).toBe('follow-ups');
    const page = '# Title\n\n## Papers\n\n```sh\n# not a heading\n```\n\n### Papers\n';
    expect([...anchorsOf(page)]).toEqual(['title', 'papers', 'papers-1']);
  });

  it('names each citation whose file or anchor is missing, and each one in the old form', () => {
    // Built from pieces, so that this file itself cites nothing that is missing.
    const md = '.md';
    const text = `see docs/runs${md}#runs, docs/runs${md}#no-such-heading and docs/none${md}#runs; ${'README'} "Runs"`;
    expect(brokenCitations(citationsIn(text, 'api/x.ts'), ROOT)).toEqual([
      `api/x.ts:1: docs/runs${md}#no-such-heading: docs/runs${md} has no heading #no-such-heading`,
      `api/x.ts:1: docs/none${md}#runs: docs/none${md} does not exist`,
    ]);
    expect(bareReadmeCitations(text.replace('README', 'README\n *'), 'api/x.ts')).toEqual([{ where: 'api/x.ts:1', heading: 'Runs' }]);
    const links = `[Runs](runs${md}#runs), [Quick start](getting-started${md}#quick-start), [gone](gone${md})`;
    expect(brokenCitations(citationsIn(links, `docs/queue${md}`), ROOT)).toEqual([`docs/queue${md}:1: gone${md}: docs/gone${md} does not exist`]);
  });

  it('in every file of the repository name a file and a heading that exist', () => {
    const files = repositoryTextFiles();
    expect(files.map(({ file }) => file)).toEqual(expect.arrayContaining(['README.md', 'docs/runs.md', 'api/openapi.ts']));
    const citations: Citation[] = files.flatMap(({ file, text }) => citationsIn(text, file));
    expect(citations.length).toBeGreaterThan(300);
    expect(brokenCitations(citations, ROOT)).toEqual([]);
  });

  it('in the published OpenAPI document name a file and a heading that exist', () => {
    const citations = citationsIn(openApi, 'the OpenAPI document');
    expect(citations.length).toBeGreaterThan(10);
    expect(brokenCitations(citations, ROOT)).toEqual([]);
    expect(bareReadmeCitations(openApi, 'the OpenAPI document')).toEqual([]);
  });

  it('are never in the old form (README and a quoted heading), except in the frozen migrations, where the heading exists', () => {
    const headings = documentationHeadings();
    const old = repositoryTextFiles().flatMap(({ file, text }) => bareReadmeCitations(text, file));
    expect(old.filter(({ where }) => !FROZEN.test(where))).toEqual([]);
    expect(old.filter(({ where, heading }) => FROZEN.test(where) && !heading.split(/",\s*"/).every((h) => headings.has(h)))).toEqual([]);
  });
});
