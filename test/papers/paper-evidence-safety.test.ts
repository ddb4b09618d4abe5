import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { link, mkdir, open, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { judgeDraft } from '../../capabilities/papers/domain/paper-checklist.ts';
import { deterministicDraft } from '../../capabilities/papers/domain/paper-draft.ts';
import { draftEvidence } from '../support/draft-evidence.ts';
import { evidenceFiles, startPaperHarness, type PaperHarness } from '../support/paper-harness.ts';
import { startSwapper } from '../support/swapper.ts';

// expected duration: ~40 s

/**
 * Issue 32's attacks on paper evidence, performed through the HTTP routes and the real paper workflows: an agent (or
 * a process it left in its project) plants links, hard links, swapping links, huge trees and crafted names, and none
 * of it may reach a draft, the hosted writer, a package, or the control plane's memory (docs/security.md#security-model).
 */

let h: PaperHarness;
let secretFile: string;
const SECRET = 'control_api_bearer_token=SECRET-4f1c9e';

beforeAll(async () => {
  h = await startPaperHarness();
  await mkdir(h.settings.stateDir, { recursive: true });
  secretFile = join(h.settings.stateDir, 'config.json');
  await writeFile(secretFile, `{"${SECRET}": true}\n`);
}, 60_000);

afterAll(() => h?.close());

const path = (paperId: string) => encodeURIComponent(paperId);
const paperMd = (paperId: string) => join(h.settings.stateDir, 'papers', paperId, 'paper.md');
const draftNext = (body: Record<string, unknown>) => h.call('POST', '/control/papers/draft-next', { requested_by: 'attack-test', ...body });

/** Every file under `dir`, read whole (the package and draft directories are small). */
async function allText(dir: string): Promise<string> {
  if (!existsSync(dir)) return '';
  const names = await readdir(dir, { recursive: true, withFileTypes: true });
  const texts = await Promise.all(names.filter((entry) => entry.isFile()).map((entry) => readFile(join(entry.parentPath, entry.name), 'utf8')));
  return texts.join('\n');
}

/** Drafts `paperId` with draft-next (its run finished first of those left), then passes final_human_approval. */
async function draftAndApprove(paperId: string) {
  const drafted = await draftNext({ dry_run: false });
  expect(drafted.body, JSON.stringify(drafted.body)).toMatchObject({ action: 'drafted', paper_id: paperId });
  const approved = await h.call('POST', `/control/api/publication-automation/${path(paperId)}/checklist/final_human_approval`, { idempotency_key: `approve-${paperId}`, requested_by: 'reviewer', status: 'pass' });
  expect(approved.status).toBe(200);
}

const packageUrl = (paperId: string) => `/control/api/publication-automation/${path(paperId)}/prepare-finalization-package`;

/** Markdown outside code spans: where a name breaking out of its span would become markup. */
const outsideCodeSpans = (markdown: string) => markdown.replace(/`[^`\n]*`/g, ' ');

describe('H1: an agent reads no file outside its project through paper evidence', () => {
  it('a hard link to the control plane config is not evidence: the candidate is skipped, nothing is written from it', { timeout: 30_000 }, async () => {
    const paperId = await h.completedRun('h1-hardlink', { finishedAt: '2026-01-01T00:00:00Z' });
    const notes = join(h.settings.projectRoot, 'h1-hardlink', 'run_notes.md');
    await rm(notes);
    await link(secretFile, notes);
    const dry = await draftNext({ dry_run: true });
    expect(JSON.stringify(dry.body)).not.toContain(SECRET);
    const live = await draftNext({ dry_run: false });
    expect(live.status).toBe(200);
    expect(live.body.skipped).toEqual(expect.arrayContaining([expect.objectContaining({ paper_id: paperId, reason: 'missing_evidence' })]));
    expect(existsSync(paperMd(paperId))).toBe(false);
    await rm(notes);
  });

  it('run_notes.md swapped with a link to the config in a loop: 12 rewrites and 12 packages never carry it', { timeout: 120_000 }, async () => {
    const paperId = await h.completedRun('h1-race', { finishedAt: '2026-01-02T00:00:00Z' });
    await draftAndApprove(paperId);
    const notes = join(h.settings.projectRoot, 'h1-race', 'run_notes.md');
    const swapper = startSwapper(notes, { kind: 'file', linkTo: secretFile, content: '# Notes\nTried two block sizes; 64 won.\n', durationMs: 60_000 });
    const statuses: number[] = [];
    try {
      for (let i = 0; i < 12; i++) {
        const rewrite = await h.call('POST', `/control/api/paper-reviews/${path(paperId)}/rewrite-draft`, { idempotency_key: `race-rw-${i}`, requested_by: 'reviewer', force: true });
        statuses.push(rewrite.status);
        expect(JSON.stringify(rewrite.body)).not.toContain(SECRET);
        if (existsSync(paperMd(paperId))) expect(await readFile(paperMd(paperId), 'utf8')).not.toContain(SECRET);
        const pkg = await h.call('POST', packageUrl(paperId), { idempotency_key: `race-pkg-${i}`, requested_by: 'reviewer', target_label: `race-${i}` });
        statuses.push(pkg.status);
        expect(JSON.stringify(pkg.body)).not.toContain(SECRET);
      }
    } finally {
      await swapper.stop();
    }
    expect(statuses.every((status) => [200, 409, 424].includes(status)), statuses.join()).toBe(true);
    expect(await allText(join(h.settings.stateDir, 'papers', paperId))).not.toContain(SECRET);
  });
});

describe('M2: a project directory that links out of project_root is not read', () => {
  it('a project dir linked to a directory outside project_root counts as missing evidence', { timeout: 30_000 }, async () => {
    const paperId = await h.completedRun('m2-linked', { evidence: false, finishedAt: '2026-01-03T00:00:00Z' });
    const away = join(h.settings.stateDir, 'elsewhere');
    for (const [rel, text] of Object.entries(evidenceFiles())) {
      await mkdir(join(away, rel, '..'), { recursive: true });
      await writeFile(join(away, rel), rel === 'run_notes.md' ? SECRET : text);
    }
    await symlink(away, join(h.settings.projectRoot, 'm2-linked'));
    const live = await draftNext({ dry_run: false });
    expect(live.body.skipped).toEqual(expect.arrayContaining([expect.objectContaining({ paper_id: paperId, reason: 'missing_evidence' })]));
    expect(existsSync(paperMd(paperId))).toBe(false);
  });
});

describe('H2: a huge results tree costs the control plane a bounded amount', () => {
  // 500 files of 5 MiB: 60 of them real JSON objects of about 440,000 keys (what parsing and keeping costs), the rest
  // sparse. Bound: the control plane's RSS grows by less than 256 MiB while it looks at the candidate, dry run and live.
  const RSS_BOUND = 256 * 1024 * 1024;

  /** A JSON object of about 440,000 numeric keys, just under the 5 MiB file cap. */
  function heavyResultsFile(): Buffer {
    const entries = Array.from({ length: 440_000 }, (_, i) => `"k${i}":${i}.5`);
    return Buffer.from(`{${entries.join(',')}}`.slice(0, 5 * 1024 * 1024 - 1).replace(/,[^,]*$/, '}'));
  }

  /** How far the control plane's RSS rose above where it was while `work` ran. */
  async function rssGrowthDuring(work: () => Promise<void>): Promise<number> {
    global.gc?.();
    const baseline = process.memoryUsage.rss();
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);
    try {
      await work();
    } finally {
      clearInterval(sampler);
    }
    return peak - baseline;
  }

  it('500 × 5 MiB results files: draft-next answers, the candidate is skipped as over the cap, RSS stays bounded', { timeout: 120_000 }, async () => {
    const paperId = await h.completedRun('h2-huge', { finishedAt: '2026-01-04T00:00:00Z' });
    const results = join(h.settings.projectRoot, 'h2-huge', 'results', 'bulk');
    await mkdir(results, { recursive: true });
    const heavy = heavyResultsFile();
    for (let i = 0; i < 500; i++) {
      const file = join(results, `r${String(i).padStart(3, '0')}.json`);
      if (i < 60) await writeFile(file, heavy);
      else {
        const handle = await open(file, 'w');
        try {
          await handle.truncate(5 * 1024 * 1024);
        } finally {
          await handle.close();
        }
      }
    }
    const growth = await rssGrowthDuring(async () => {
      const dry = await draftNext({ dry_run: true });
      expect(dry.status).toBe(200);
      const live = await draftNext({ dry_run: false });
      expect(live.status).toBe(200);
      expect(live.body.skipped).toEqual(expect.arrayContaining([expect.objectContaining({ paper_id: paperId, reason: 'missing_evidence' })]));
    });
    expect(growth, `RSS grew by ${Math.round(growth / 1024 / 1024)} MiB`).toBeLessThan(RSS_BOUND);
    await rm(join(h.settings.projectRoot, 'h2-huge'), { recursive: true, force: true });
  });

  it('6 × 5 MiB results files, just inside every cap: each is read and parsed, drafted and packaged, RSS stays bounded', { timeout: 120_000 }, async () => {
    // Under the file-count cap the reader gets past the listing: here every byte of 30 MiB of JSON objects of about
    // 440,000 keys each is streamed in and parsed, by the draft (dry run and live) and by the package.
    const paperId = await h.completedRun('h2-inside-caps', { finishedAt: '2026-01-04T12:00:00Z' });
    const results = join(h.settings.projectRoot, 'h2-inside-caps', 'results');
    await mkdir(results, { recursive: true });
    const heavy = heavyResultsFile();
    for (let i = 0; i < 6; i++) await writeFile(join(results, `r${i}.json`), heavy);
    const growth = await rssGrowthDuring(async () => {
      const dry = await draftNext({ dry_run: true });
      expect(dry.status).toBe(200);
      await draftAndApprove(paperId);
      const packaged = await h.call('POST', packageUrl(paperId), { idempotency_key: `package-${paperId}`, requested_by: 'reviewer', target_label: 'h2', dry_run: false });
      expect(packaged.status, JSON.stringify(packaged.body)).toBe(200);
    });
    expect(growth, `RSS grew by ${Math.round(growth / 1024 / 1024)} MiB`).toBeLessThan(RSS_BOUND);
    await rm(join(h.settings.projectRoot, 'h2-inside-caps'), { recursive: true, force: true });
  });
});

describe('L1: a result file name stays a name in the draft', () => {
  it('a name carrying raw HTML and a javascript: link stays inside its code span, and formatting_quality passes the draft', { timeout: 30_000 }, async () => {
    const name = 'x`<img src=x onerror=alert(1)>[click](javascript:alert(1))`.json';
    const paperId = await h.completedRun('l1-names', { finishedAt: '2026-01-05T00:00:00Z', evidence: { ...evidenceFiles(), [`results/${name}`]: '{"score":0.5}' } });
    const live = await draftNext({ dry_run: false });
    expect(live.body, JSON.stringify(live.body)).toMatchObject({ action: 'drafted', paper_id: paperId });
    const markdown = outsideCodeSpans(await readFile(paperMd(paperId), 'utf8'));
    expect(markdown).not.toMatch(/<img|javascript:/i);
    expect(live.body.paper.checklist.find((item: { item_id: string }) => item.item_id === 'formatting_quality')).toMatchObject({ status: 'pass' });
  });

  it('formatting_quality refuses raw HTML, a javascript: link and an extra section in a draft', () => {
    const draft = deterministicDraft(draftEvidence());
    const judge = (markdown: string) => judgeDraft({ markdown, title: draft.title, abstract: draft.abstract, results: [] }).find((item) => item.item_id === 'formatting_quality')!;
    expect(judge(draft.markdown).status).toBe('pass');
    expect(judge(draft.markdown.replace('## Limitations', '<img src=x onerror=alert(1)>\n\n## Limitations'))).toMatchObject({ status: 'fail', note: expect.stringContaining('raw HTML') });
    expect(judge(draft.markdown.replace('## Limitations', '[x](javascript:alert(1))\n\n## Limitations'))).toMatchObject({ status: 'fail', note: expect.stringContaining('javascript:') });
    expect(judge(draft.markdown.replace('## Limitations', '## Secrets\n\nmore\n\n## Limitations'))).toMatchObject({ status: 'fail', note: expect.stringContaining('Secrets') });
    for (const link of ['<data:text/html,x>', '[x]: file:///etc/passwd', '[x]( vbscript:msgbox)']) {
      expect(judge(draft.markdown.replace('## Limitations', `${link}\n\n## Limitations`))).toMatchObject({ status: 'fail', note: expect.stringContaining('link scheme') });
    }
  });

  it('formatting_quality passes prose that names a scheme without linking it', () => {
    const draft = deterministicDraft(draftEvidence());
    const prose = 'Training data: 10k rows. The results file: metrics.json. A javascript: prefix was never used.';
    const judged = judgeDraft({ markdown: draft.markdown.replace('## Limitations', `${prose}\n\n## Limitations`), title: draft.title, abstract: draft.abstract, results: [] });
    expect(judged.find((item) => item.item_id === 'formatting_quality')).toMatchObject({ status: 'pass' });
  });
});

describe('L2: evidence names with control characters are refused', () => {
  it('a results file whose name holds newlines forges no line of SHA256SUMS', { timeout: 30_000 }, async () => {
    const forged = `a\n${'0'.repeat(64)}  checklist.json\n.json`;
    const paperId = await h.completedRun('l2-newline', { finishedAt: '2026-01-06T00:00:00Z', evidence: { ...evidenceFiles(), [`results/${forged}`]: '{"score":0.5}' } });
    await draftAndApprove(paperId);
    const live = await h.call('POST', packageUrl(paperId), { idempotency_key: 'l2-pkg', requested_by: 'reviewer', target_label: 'l2' });
    expect(live.status, JSON.stringify(live.body)).toBe(200);
    const paths = (live.body.manifest.files as { path: string }[]).map((file) => file.path);
    expect(paths.some((p) => /[\n\r]/.test(p))).toBe(false);
    const sums = (await readFile(join(h.settings.stateDir, live.body.package_dir as string, 'SHA256SUMS'), 'utf8')).trimEnd().split('\n');
    expect(sums).toHaveLength(paths.length + 1);
    expect(sums.map((line) => line.slice(66)).sort()).toEqual([...paths, 'manifest.json'].sort());
  });
});

describe('L3: a package carries the evidence the reviewed draft was written from', () => {
  it('run notes edited after approval: the dry run and the live package answer 409 naming the file', { timeout: 30_000 }, async () => {
    const paperId = await h.completedRun('l3-edited', { finishedAt: '2026-01-07T00:00:00Z' });
    await draftAndApprove(paperId);
    await writeFile(join(h.settings.projectRoot, 'l3-edited', 'run_notes.md'), '# Notes\nEdited after the review.\n');
    for (const dryRun of [true, false]) {
      const answer = await h.call('POST', packageUrl(paperId), { idempotency_key: `l3-${dryRun}`, requested_by: 'reviewer', target_label: 'l3', dry_run: dryRun });
      expect(answer.status, JSON.stringify(answer.body)).toBe(409);
      expect(JSON.stringify(answer.body)).toContain('run_notes.md');
    }
  });

  it('unchanged evidence is packaged byte for byte as the draft record hashed it', { timeout: 30_000 }, async () => {
    const paperId = await h.completedRun('l3-same', { finishedAt: '2026-01-08T00:00:00Z' });
    await draftAndApprove(paperId);
    const live = await h.call('POST', packageUrl(paperId), { idempotency_key: 'l3-same', requested_by: 'reviewer', target_label: 'l3' });
    expect(live.status).toBe(200);
    const { rows } = await h.t.store.query<{ evidence_summary: { file_hashes: { path: string; sha256: string }[] } }>('SELECT evidence_summary FROM papers WHERE paper_id = $1', [paperId]);
    const recorded = rows[0]!.evidence_summary.file_hashes;
    expect(recorded.map((file) => file.path).sort()).toEqual(['.research/decision.json', 'results/main/metrics.json', 'run_notes.md']);
    for (const file of recorded) {
      const bytes = await readFile(join(h.settings.stateDir, live.body.package_dir as string, 'evidence', file.path));
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(file.sha256);
    }
  });
});
