import { createServer, type Server } from 'node:http';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchRunHistory, maybeSaveHistory } from '../support/histories.ts';
import { evidenceFiles, startPaperHarness, type PaperHarness } from '../support/paper-harness.ts';
import { startSshd, type TestSshd } from '../support/sshd.ts';

// expected duration: ~25 s

/**
 * The hosted writer and evidence sync inside real paper workflows: a local OpenAI-compatible server stands in for the
 * hosted writer, and a real sshd on a loopback port for the worker that holds the evidence.
 */

const API_KEY = 'sk-paper-writer-NEVER-LOGGED-5150';

type Mode = 'ok' | 'hang' | 'error500' | 'malformed';

/** An OpenAI-compatible chat/completions server whose answer the test chooses. */
class FakeWriter {
  mode: Mode = 'ok';
  readonly authorizations: string[] = [];
  readonly server: Server;
  readonly url: string;

  private constructor(server: Server, url: string) {
    this.server = server;
    this.url = url;
  }

  static async start(): Promise<FakeWriter> {
    let writer: FakeWriter;
    const server = createServer((request, response) => {
      writer.authorizations.push(request.headers.authorization ?? '');
      request.resume();
      request.on('end', () => {
        if (writer.mode === 'hang') return;
        if (writer.mode === 'error500') {
          response.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"overloaded"}');
          return;
        }
        const content = writer.mode === 'malformed' ? 'Sure! Here is your paper, no JSON though.' : JSON.stringify(HOSTED_PAPER);
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ choices: [{ message: { role: 'assistant', content } }] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address() as { port: number };
    writer = new FakeWriter(server, `http://127.0.0.1:${address.port}/v1`);
    return writer;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const HOSTED_PAPER = {
  title: 'Block size 64 sparse attention holds accuracy',
  abstract: 'We report a run whose measured accuracy was 0.912 with a loss of 0.31, written by the hosted writer.',
  markdown: [
    '# Block size 64 sparse attention holds accuracy',
    '',
    '## Abstract',
    '',
    'We report a run whose measured accuracy was 0.912 with a loss of 0.31, written by the hosted writer.',
    '',
    '## Method',
    '',
    'The agent compared two block sizes.',
    '',
    '## Results',
    '',
    '| metric | value |',
    '|---|---|',
    '| `accuracy` | 0.912 |',
    '| `loss` | 0.31 |',
    '',
    '## Decision',
    '',
    'The agent decided `finalize_positive`.',
    '',
    '## Limitations',
    '',
    'One run; not repeated.',
    '',
    '## Reproducibility',
    '',
    'See `results/main/metrics.json`.',
    '',
  ].join('\n'),
};

let writer: FakeWriter;
const harnesses: PaperHarness[] = [];

beforeAll(async () => {
  writer = await FakeWriter.start();
}, 30_000);

afterAll(async () => {
  await Promise.all(harnesses.map((harness) => harness.close()));
  await writer?.close();
});

async function hostedHarness(fallback: boolean): Promise<PaperHarness> {
  const harness = await startPaperHarness(() => ({
    writer: {
      provider: 'openai_compatible',
      hosted: { base_url: writer.url, model: 'test-model', api_key: API_KEY, timeout_ms: 1_500, temperature: 0.2, max_tokens: 4000 },
      fallback,
    },
  }));
  harnesses.push(harness);
  return harness;
}

const draftNext = (h: PaperHarness) => h.call('POST', '/control/papers/draft-next', { dry_run: false, requested_by: 'writer-test' });

/** Every place the API key must never reach: logs, answers, ledgers, draft files. */
async function expectKeyNowhere(h: PaperHarness, answers: unknown[]) {
  expect(h.t.logs.text).not.toContain(API_KEY);
  expect(JSON.stringify(answers)).not.toContain(API_KEY);
  const ledgers = await h.t.store.query<{ dump: string }>(
    `SELECT concat((SELECT string_agg(payload::text, ' ') FROM audit_events), (SELECT string_agg(row_to_json(p)::text, ' ') FROM papers p)) AS dump`,
  );
  expect(ledgers.rows[0]!.dump ?? '').not.toContain(API_KEY);
  for (const file of await readdir(h.settings.stateDir, { recursive: true }).catch(() => [])) {
    const text = await readFile(join(h.settings.stateDir, file), 'utf8').catch(() => '');
    expect(text, file).not.toContain(API_KEY);
  }
}

describe('the hosted writer', () => {
  it('writes the draft, sending the key only in the Authorization header', { timeout: 30_000 }, async () => {
    const h = await hostedHarness(true);
    writer.mode = 'ok';
    const paperId = await h.completedRun('hosted-ok');
    const answer = await draftNext(h);
    expect(answer.body).toMatchObject({ action: 'drafted', paper_id: paperId, paper: { writer: 'hosted', writer_fallback_reason: null, paper_status: 'draft_review', title: HOSTED_PAPER.title } });
    expect(await readFile(join(h.settings.stateDir, 'papers', paperId, 'paper.md'), 'utf8')).toBe(HOSTED_PAPER.markdown);
    expect(writer.authorizations.at(-1)).toBe(`Bearer ${API_KEY}`);
    await expectKeyNowhere(h, [answer]);
  });

  it.each([
    ['hang', 'timeout'],
    ['error500', 'server_error'],
    ['malformed', 'malformed_output'],
  ] as const)('falls back to the deterministic writer when the hosted one fails (%s), saying why on the paper and in the audit event', { timeout: 30_000 }, async (mode, kind) => {
    const h = await hostedHarness(true);
    writer.mode = mode;
    const paperId = await h.completedRun(`hosted-fallback-${mode.toLowerCase()}`);
    const answer = await draftNext(h);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ action: 'drafted', paper: { writer: 'deterministic', writer_fallback_reason: expect.stringContaining(kind), paper_status: 'draft_review' } });
    const event = await h.t.store.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM audit_events WHERE entity_id = $1 AND event_type = 'paper.drafted'`, [paperId]);
    expect(event.rows[0]!.payload).toMatchObject({ writer: 'deterministic', writer_fallback_reason: expect.stringContaining(kind) });
    await expectKeyNowhere(h, [answer]);
  });

  it('without fallback, fails with a clear 502 and leaves the paper as it was', { timeout: 30_000 }, async () => {
    const h = await hostedHarness(false);
    writer.mode = 'ok';
    const paperId = await h.completedRun('hosted-strict');
    expect((await draftNext(h)).body).toMatchObject({ action: 'drafted', paper: { writer: 'hosted' } });
    const before = (await h.call('GET', `/control/api/papers?search=hosted-strict`)).body.items[0];
    const draft = await readFile(join(h.settings.stateDir, 'papers', paperId, 'paper.md'), 'utf8');

    writer.mode = 'error500';
    const answer = await h.call('POST', `/control/api/paper-reviews/${encodeURIComponent(paperId)}/rewrite-draft`, { idempotency_key: 'strict-1', requested_by: 'writer-test' });
    expect(answer.status).toBe(502);
    expect(answer.body.detail.message).toMatch(/hosted writer server_error.*paper_writer_fallback_enabled is false/);
    const after = (await h.call('GET', `/control/api/papers?search=hosted-strict`)).body.items[0];
    expect({ ...after, updated_at: null }).toEqual({ ...before, updated_at: null });
    expect(await readFile(join(h.settings.stateDir, 'papers', paperId, 'paper.md'), 'utf8')).toBe(draft);
    const failed = await h.t.store.query(`SELECT 1 FROM audit_events WHERE entity_id = $1 AND event_type = 'paper_review.rewrite_failed'`, [paperId]);
    expect(failed.rowCount).toBe(1);
    maybeSaveHistory('paper-writer-failed', await fetchRunHistory(`paper:${paperId}`));
    // The refused key was given up: the same request succeeds once the writer is back.
    writer.mode = 'ok';
    const retried = await h.call('POST', `/control/api/paper-reviews/${encodeURIComponent(paperId)}/rewrite-draft`, { idempotency_key: 'strict-1', requested_by: 'writer-test' });
    expect(retried.status).toBe(200);
    await expectKeyNowhere(h, [answer, retried]);
  });
});

describe('evidence sync over ssh', () => {
  let sshd: TestSshd;
  let h: PaperHarness;
  const previousAgent = process.env.SSH_AUTH_SOCK;

  beforeAll(async () => {
    sshd = await startSshd();
    process.env.SSH_AUTH_SOCK = sshd.env.SSH_AUTH_SOCK;
    h = await startPaperHarness(({ stateDir }) => ({
      evidenceSync: { ssh_host: sshd.host, remote_root: sshd.remoteRoot, timeout_ms: 20_000, known_hosts_file: join(stateDir, 'evidence-sync', 'known_hosts') },
    }));
    harnesses.push(h);
  }, 60_000);

  afterAll(async () => {
    if (previousAgent === undefined) delete process.env.SSH_AUTH_SOCK;
    else process.env.SSH_AUTH_SOCK = previousAgent;
    await sshd?.stop();
  });

  async function writeRemote(projectId: string) {
    for (const [rel, text] of Object.entries({ ...evidenceFiles(), 'train.py': 'print("not evidence")\n' })) {
      const file = join(sshd.remoteRoot, projectId, rel);
      await mkdir(join(file, '..'), { recursive: true });
      await writeFile(file, text);
    }
  }

  it('copies the evidence from the worker before drafting, and only the evidence', { timeout: 60_000 }, async () => {
    const paperId = await h.completedRun('synced', { evidence: false });
    await writeRemote('synced');
    const answer = await draftNext(h);
    expect(answer.body).toMatchObject({
      action: 'drafted',
      paper_id: paperId,
      result: { evidence_sync: { ok: true, copied: ['.research/decision.json', 'results/main/metrics.json', 'run_notes.md'] } },
      paper: { paper_status: 'draft_review' },
    });
    const local = (await readdir(join(h.settings.projectRoot, 'synced'), { recursive: true })).sort();
    expect(local).not.toContain('train.py');
  });

  it('answers a rewrite 424 with over_cap when the evidence on the worker grew past its caps, though an older copy is here', { timeout: 60_000 }, async () => {
    const paperId = await h.completedRun('grown', { evidence: false });
    await writeRemote('grown');
    expect((await draftNext(h)).body).toMatchObject({ action: 'drafted', paper_id: paperId });
    for (let i = 0; i < 201; i++) await writeFile(join(sshd.remoteRoot, 'grown', 'results', `extra-${i}.json`), '{"score":1}');

    const before = (await h.call('GET', '/control/api/papers?search=grown')).body.items[0];
    const answer = await h.call('POST', `/control/api/publication-automation/${encodeURIComponent(paperId)}/rewrite-draft`, { idempotency_key: 'grown-1', requested_by: 'writer-test' });
    expect(answer.status).toBe(424);
    expect(answer.body.detail.evidence_sync).toMatchObject({ enabled: true, ok: false, over_cap: true, copied: [], missing: [expect.stringMatching(/over its cap \(more than 200 files\)/)] });
    expect((await readdir(join(h.settings.projectRoot, 'grown', 'results'), { recursive: true })).filter((name) => name.startsWith('extra-'))).toEqual([]);
    expect((await h.call('GET', '/control/api/papers?search=grown')).body.items[0]).toEqual(before);
  });

  it('answers a rewrite 424 with what sync tried and what is missing when the worker cannot be reached, writing nothing', { timeout: 60_000 }, async () => {
    const paperId = await h.completedRun('unsynced', { evidence: false });
    await writeRemote('unsynced');
    expect((await draftNext(h)).body).toMatchObject({ action: 'drafted', paper_id: paperId });
    await rm(join(h.settings.projectRoot, 'unsynced'), { recursive: true, force: true });
    await sshd.kill();

    const counts = async () => (await h.t.store.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_events')).rows[0]!.n;
    const before = { events: await counts(), paper: (await h.call('GET', '/control/api/papers?search=unsynced')).body.items[0] };
    const answer = await h.call('POST', `/control/api/publication-automation/${encodeURIComponent(paperId)}/rewrite-draft`, { idempotency_key: 'sync-1', requested_by: 'writer-test' });
    expect(answer.status).toBe(424);
    expect(answer.body.detail.evidence_sync).toMatchObject({
      enabled: true,
      ok: false,
      source: expect.stringContaining(`${sshd.port}`),
      command: expect.stringContaining('rsync'),
      missing: expect.arrayContaining([expect.stringContaining('run_notes.md')]),
    });
    expect(await counts()).toBe(before.events);
    expect((await h.call('GET', '/control/api/papers?search=unsynced')).body.items[0]).toEqual(before.paper);
    maybeSaveHistory('paper-evidence-missing', await fetchRunHistory(`paper:${paperId}`));
    const keys = await h.t.store.query(`SELECT 1 FROM idempotency_keys WHERE key = 'sync-1'`);
    expect(keys.rowCount).toBe(0);
  });
});
