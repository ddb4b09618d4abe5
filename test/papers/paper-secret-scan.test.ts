import { generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatProblems, loadConfig } from '../../platform/config/load.ts';
import { readEvidence } from '../../capabilities/papers/paper-evidence.ts';
import { paperWithChecklist } from '../../capabilities/papers/paper-reviews.ts';
import { paperSettingsFrom } from '../../capabilities/papers/paper-settings.ts';
import { MIN_SECRET_LENGTH, ServiceSecrets, serviceSecretsFrom } from '../../platform/config/service-secrets.ts';
import { getPaper } from '../../capabilities/papers/paper-ledger.ts';
import { TEST_GATE_TOKEN, TEST_TOKEN } from '../support/app.ts';
import { evidenceFiles, startPaperHarness, type PaperHarness } from '../support/paper-harness.ts';
import { fetchRunHistory, maybeSaveHistory } from '../support/histories.ts';
import { startLoopbackServer, type ReceivedRequest } from '../support/receiver.ts';
import { parentOf } from '../support/workflow-listing.ts';

// expected duration: ~30 s

/**
 * A paper's evidence never carries this service's secrets. An agent that ran `cat <config> >>
 * run_notes.md` (or left a token in a results file, base64 or hex) gets no draft, no rewrite, no hosted writer's request
 * and no finalization package out of it: each step is refused naming the file, the paper is held for human review with
 * the finding, and an audit event names the file, never the value. Through the HTTP routes and the real paper
 * workflows, with the secrets gathered from a real config file as the control plane loads it.
 */

const CALLBACK_TOKEN = 'callback-token-5f4e3d2c1b0a9988';
const WRITER_KEY = 'sk-writer-secret-0a1b2c3d4e5f6071';
const TARGET_TOKEN = 'gpu-target-token-77aa88bb99cc00dd';
const DB_PASSWORD = 'pg-pass-Zq8Xw2Lm4Nv6';
const ALL_SECRETS = [TEST_TOKEN, TEST_GATE_TOKEN, CALLBACK_TOKEN, WRITER_KEY, TARGET_TOKEN, DB_PASSWORD];

/** A hosted writer (OpenAI-compatible) that keeps every request and answers a draft the checklist passes. */
const writerRequests: ReceivedRequest[] = [];
let writer: { origin: string; close: () => Promise<void> };
/** Runs while a request is being answered, before the answer. */
let whileWriting: (() => Promise<void>) | null = null;
const draftMarkdown = [
  '# Larger blocks halve memory', '', '## Abstract', '', 'Accuracy reached 0.912 at a loss of 0.31 with the larger block.', '',
  '## Method', '', 'Two block sizes were tried.', '', '## Results', '', 'Accuracy 0.912, loss 0.31.', '', '## Decision', '', 'Positive.', '',
  '## Limitations', '', 'One run.', '', '## Reproducibility', '', 'See `results/main/metrics.json`.', '',
].join('\n');

let h: PaperHarness;
let configDir: string;
/** The control plane's config file as an agent would `cat` it. */
let configText: string;

beforeAll(async () => {
  writer = await startLoopbackServer(async (request, response) => {
    writerRequests.push(request);
    await whileWriting?.();
    const content = JSON.stringify({ title: 'Larger blocks halve memory', abstract: 'Accuracy reached 0.912 at a loss of 0.31 with the larger block.', markdown: draftMarkdown });
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ choices: [{ message: { content } }] }));
  });
  configDir = await mkdtemp(join(tmpdir(), 'rcp-secret-scan-'));
  const config = {
    roles: ['control_plane', 'worker_gate'],
    control_api_bearer_token: TEST_TOKEN,
    worker_wake_gate_bearer_token: TEST_GATE_TOKEN,
    completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
    completion_callback_token: CALLBACK_TOKEN,
    dispatch_script_path: './agent.sh',
    state_dir: './state',
    project_root: './projects',
    control_plane_store_backend: 'pg',
    pg_database_url: `postgres://rcp:${DB_PASSWORD}@127.0.0.1:5432/rcp`,
    worker_targets: { gpu: { wake_gate_url: 'http://10.0.0.5:8788', bearer_token: TARGET_TOKEN, role: 'gpu_worker' } },
    paper_writer_provider: 'openai_compatible',
    paper_writer_base_url: `${writer.origin}/v1`,
    paper_writer_model: 'secret-scan-model',
    paper_writer_api_key: WRITER_KEY,
    paper_writer_fallback_enabled: false,
  };
  configText = `${JSON.stringify(config, null, 2)}\n`;
  await writeFile(join(configDir, 'config.json'), configText);
  const loaded = loadConfig({ env: { SVC_CONFIG: join(configDir, 'config.json') }, cwd: configDir });
  if (!loaded.ok) throw new Error(formatProblems(loaded.problems));
  const fromConfig = paperSettingsFrom(loaded.config);
  h = await startPaperHarness(() => ({ writer: fromConfig.writer, secrets: fromConfig.secrets }));
}, 60_000);

afterAll(async () => {
  await h?.close();
  await writer?.close();
  await rm(configDir, { recursive: true, force: true });
});

const path = (paperId: string) => encodeURIComponent(paperId);
const draftNext = (body: Record<string, unknown>) => h.call('POST', '/control/papers/draft-next', { requested_by: 'secret-test', ...body });
const projectFile = (projectId: string, rel: string) => join(h.settings.projectRoot, projectId, rel);

/** What must never hold a secret value: every answer, the log, the writer's request bodies, every table, every file the service wrote. */
async function expectNoSecretAnywhere(answers: unknown[]) {
  const tables = await h.t.store.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`);
  const rows: string[] = [];
  for (const { table_name } of tables.rows) {
    const dump = await h.t.store.query<{ row: string }>(`SELECT row_to_json(t)::text AS row FROM "${table_name}" t`);
    rows.push(...dump.rows.map((row) => row.row));
  }
  const database = rows.join('\n');
  const written = existsSync(h.settings.stateDir) ? await allText(h.settings.stateDir) : '';
  for (const secret of ALL_SECRETS) {
    for (const answer of answers) expect(JSON.stringify(answer)).not.toContain(secret);
    expect(h.t.logs.text).not.toContain(secret);
    for (const request of writerRequests) expect(request.body).not.toContain(secret);
    expect(database).not.toContain(secret);
    expect(written).not.toContain(secret);
  }
}

async function allText(dir: string): Promise<string> {
  const names = await readdir(dir, { recursive: true, withFileTypes: true });
  const texts = await Promise.all(names.filter((entry) => entry.isFile()).map((entry) => readFile(join(entry.parentPath, entry.name), 'utf8')));
  return texts.join('\n');
}

async function paperState(paperId: string) {
  const paper = await paperWithChecklist(h.t.store, (await getPaper(h.t.store, paperId))!);
  const events = await h.t.store.query<{ event_type: string; payload: Record<string, any> }>(
    `SELECT event_type, payload FROM audit_events WHERE entity_id = $1 AND event_type = 'paper.evidence_secret_found' ORDER BY id`,
    [paperId],
  );
  return { paper, events: events.rows };
}

/** The paper was held for a person: human_review_required, its review blocked with the finding, approval failed. */
async function expectHeld(paperId: string, file: string, secretField: string) {
  const { paper, events } = await paperState(paperId);
  const row = paper;
  expect(row.paper_status).toBe('human_review_required');
  expect(row.review_status).toBe('blocked');
  const approval = (row.checklist as { item_id: string; status: string; note: string }[]).find((item) => item.item_id === 'final_human_approval')!;
  expect(approval.status).toBe('fail');
  expect(approval.note).toContain(file);
  expect(events.length).toBeGreaterThan(0);
  const event = events.at(-1)!;
  expect(event.payload.files).toEqual(expect.arrayContaining([expect.objectContaining({ file })]));
  expect(JSON.stringify(event.payload.files)).toContain(secretField);
  return { paper: row, event };
}

async function draftClean(projectId: string, finishedAt: string) {
  const paperId = await h.completedRun(projectId, { finishedAt });
  const drafted = await draftNext({ dry_run: false });
  expect(drafted.body, JSON.stringify(drafted.body)).toMatchObject({ action: 'drafted', paper_id: paperId });
  return paperId;
}

describe('the service secrets a config holds', () => {
  it('are found as they are, split across chunks, base64 (wrapped, any alignment), hex and URL-encoded; a finding names the field, never the value', async () => {
    const loaded = loadConfig({ env: { SVC_CONFIG: join(configDir, 'config.json') }, cwd: configDir });
    if (!loaded.ok) throw new Error(formatProblems(loaded.problems));
    // The environment the process runs with carries Temporal's key beside the config.
    const secrets = serviceSecretsFrom(loaded.config, { TEMPORAL_API_KEY: 'temporal-api-key-9f8e7d6c5b4a' });
    const fresh = ServiceSecrets.of([{ name: 'temporal_api_key', value: 'temporal-api-key-9f8e7d6c5b4a' }]);
    expect(fresh.find('nothing here')).toEqual([]);

    expect(secrets.find(configText)).toEqual(expect.arrayContaining(['completion_callback_token', 'control_api_bearer_token', 'paper_writer_api_key', 'pg_database_url', 'worker_targets.gpu.bearer_token', 'worker_wake_gate_bearer_token']));
    // `cat config.json | base64`: wrapped at 76 characters, each token at whatever alignment the file put it.
    const wrapped = Buffer.from(`padding${configText}`).toString('base64').replace(/(.{76})/g, '$1\n');
    expect(secrets.find(wrapped)).toEqual(expect.arrayContaining(['control_api_bearer_token (base64)', 'worker_wake_gate_bearer_token (base64)', 'paper_writer_api_key (base64)']));
    expect(secrets.find(Buffer.from(`x${TEST_GATE_TOKEN}`).toString('hex').replace(/(.{60})/g, '$1\n'))).toEqual(['worker_wake_gate_bearer_token (hex)']);
    expect(secrets.find(`password=${encodeURIComponent(DB_PASSWORD)}`)).toEqual(expect.arrayContaining(['pg_database_url password']));
    expect(secrets.find('temporal-api-key-9f8e7d6c5b4a')).toEqual(['TEMPORAL_API_KEY']);

    // Fed one file in chunks: a token split across every possible border is still found.
    const text = Buffer.from(`${'x'.repeat(100)}${TEST_GATE_TOKEN}${'y'.repeat(100)}`);
    for (let border = 95; border < 100 + TEST_GATE_TOKEN.length + 5; border++) {
      const scanner = secrets.scanner();
      scanner.feed(text.subarray(0, border));
      scanner.feed(text.subarray(border, border + 3));
      scanner.feed(text.subarray(border + 3));
      expect(scanner.labels(), `split at ${border}`).toEqual(['worker_wake_gate_bearer_token']);
    }
    // `fold -w 20` of a token: the line breaks are passed over.
    expect(secrets.find(TEST_TOKEN.replace(/(.{20})/g, '$1\n'))).toEqual(['control_api_bearer_token']);
    // Temporal's client key, as a file and as data: part of the key (`head -5`) is found by its lines.
    const keyPath = join(configDir, 'client.key');
    const pem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    await writeFile(keyPath, pem);
    const withKey = serviceSecretsFrom(loaded.config, { TEMPORAL_TLS_CLIENT_KEY_PATH: keyPath, TEMPORAL_TLS_CLIENT_KEY_DATA: pem });
    const head = pem.split('\n').slice(0, 5).join('\n');
    // The same key twice is looked for once, under the first name it was found by.
    expect(withKey.find(head)).toEqual(['temporal_tls_client_key_path (the key file) (a line of the key)']);
    expect(withKey.find(Buffer.from(pem).toString('base64').replace(/(.{76})/g, '$1\n'))).toEqual(expect.arrayContaining(['temporal_tls_client_key_path (the key file) (base64)']));
    expect(serviceSecretsFrom(loaded.config, { TEMPORAL_TLS_CLIENT_KEY_DATA: pem }).find(head)).toEqual(['TEMPORAL_TLS_CLIENT_KEY_DATA (a line of the key)']);
    // Too short to look for: it would match ordinary text.
    expect(ServiceSecrets.of([{ name: 'short', value: 'x'.repeat(MIN_SECRET_LENGTH - 1) }]).find('x'.repeat(100))).toEqual([]);
  });

  it('are found in an evidence file larger than a read chunk, across the chunk border, and make the evidence incomplete', async () => {
    const projectId = 'scan-big';
    const dir = join(h.settings.projectRoot, projectId);
    await mkdir(join(dir, '.research'), { recursive: true });
    const chunk = 64 * 1024;
    const at = chunk - Math.floor(TEST_TOKEN.length / 2);
    await writeFile(join(dir, 'run_notes.md'), `${'n'.repeat(at)}${TEST_TOKEN}${'n'.repeat(chunk)}`);
    await writeFile(join(dir, '.research', 'decision.json'), JSON.stringify({ decision: 'finalize_positive', summary: 'ok' }));
    const read = await readEvidence(h.settings.projectRoot, projectId, { secrets: h.settings.secrets });
    expect(read.complete).toBe(false);
    expect(read.secrets).toEqual([{ file: 'run_notes.md', secrets: ['control_api_bearer_token'] }]);
    expect(read.missing.join(' ')).toContain('run_notes.md');
    expect(JSON.stringify(read.missing)).not.toContain(TEST_TOKEN);
  });
});

describe('draft-next refuses evidence holding the service secrets', () => {
  it('a config cat into run_notes.md: the dry run says so, the live call is a 409 naming the file, the paper is held, the writer is never asked', { timeout: 60_000 }, async () => {
    const paperId = await h.completedRun('cat-config', { finishedAt: '2026-01-01T00:00:00Z' });
    await appendFile(projectFile('cat-config', 'run_notes.md'), `\n$ cat /etc/rcp/config.json\n${configText}`);
    const requestsBefore = writerRequests.length;

    const dry = await draftNext({ dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ action: 'dry_run_draft', paper_id: paperId, evidence: { complete: false } });
    expect(dry.body.evidence.secrets).toEqual([expect.objectContaining({ file: 'run_notes.md' })]);

    const live = await draftNext({ dry_run: false });
    expect(live.status, JSON.stringify(live.body)).toBe(409);
    expect(live.body.detail.message).toContain('"run_notes.md"');
    expect(live.body.detail.message).toContain('worker_wake_gate_bearer_token');
    expect(live.body.detail).toMatchObject({ paper_id: paperId, secrets: [expect.objectContaining({ file: 'run_notes.md' })] });
    expect(live.body.detail.paper).toMatchObject({ paper_status: 'human_review_required', review_status: 'blocked' });
    const { event } = await expectHeld(paperId, 'run_notes.md', 'control_api_bearer_token');
    expect(event.payload.stage).toBe('paper_step');
    expect(writerRequests.length).toBe(requestsBefore);
    expect(existsSync(join(h.settings.stateDir, 'papers', paperId))).toBe(false);

    maybeSaveHistory('paper-held-for-review.paper-evidence-secrets', await fetchRunHistory(`paper:${paperId}`));
    maybeSaveHistory('paper-draft-next-held.paper-evidence-secrets', await fetchRunHistory((await parentOf(`paper:${paperId}`))!));

    // Held, it is no candidate of a plain draft-next any more: the next one drafts.
    const again = await draftNext({ dry_run: false });
    expect(again.body).toMatchObject({ action: 'noop' });
    await expectNoSecretAnywhere([dry.body, live.body, again.body]);
  });

  it('a token in another evidence file, base64 in a results file, is found there', { timeout: 60_000 }, async () => {
    const paperId = await h.completedRun('b64-results', {
      finishedAt: '2026-01-02T00:00:00Z',
      evidence: { ...evidenceFiles(), 'results/main/extra.json': JSON.stringify({ accuracy: 0.9, blob: Buffer.from(`gate=${TEST_GATE_TOKEN}`).toString('base64') }) },
    });
    const live = await draftNext({ dry_run: false });
    expect(live.status, JSON.stringify(live.body)).toBe(409);
    expect(live.body.detail.message).toContain('"results/main/extra.json"');
    expect(live.body.detail.message).toContain('worker_wake_gate_bearer_token (base64)');
    await expectHeld(paperId, 'results/main/extra.json', 'worker_wake_gate_bearer_token (base64)');
    await expectNoSecretAnywhere([live.body]);
  });

  it('a token as the name of a results file: the name is named by where it is, never repeated', { timeout: 60_000 }, async () => {
    const paperId = await h.completedRun('token-name', {
      finishedAt: '2026-01-02T12:00:00Z',
      evidence: { ...evidenceFiles(), [`results/${TARGET_TOKEN}/metrics.json`]: JSON.stringify({ accuracy: 0.9 }) },
    });
    const dry = await draftNext({ dry_run: true });
    expect(dry.body.evidence.secrets).toEqual([{ file: 'the name of a file under results/', secrets: ['worker_targets.gpu.bearer_token'] }]);
    const live = await draftNext({ dry_run: false });
    expect(live.status, JSON.stringify(live.body)).toBe(409);
    await expectHeld(paperId, 'the name of a file under results/', 'worker_targets.gpu.bearer_token');
    await expectNoSecretAnywhere([dry.body, live.body]);
  });

  it("the run record's decision summary holding the writer key: the hosted writer's request is refused, the step does not return the paper", { timeout: 60_000 }, async () => {
    const files = evidenceFiles();
    const paperId = await h.completedRun('summary-key', {
      finishedAt: '2026-01-03T00:00:00Z',
      evidence: { ...files, '.research/decision.json': JSON.stringify({ decision: 'finalize_positive' }) },
    });
    await h.t.store.query(`UPDATE runs SET decision_summary = $2 WHERE run_id = $1`, [paperId.split(':')[1], `key is ${WRITER_KEY}`]);
    const requestsBefore = writerRequests.length;
    const live = await draftNext({ dry_run: false });
    expect(live.status, JSON.stringify(live.body)).toBe(409);
    expect(live.body.detail.message).toContain('paper_writer_api_key');
    const { event } = await expectHeld(paperId, 'the run record (decision and its summary)', 'paper_writer_api_key');
    expect(event.payload.stage).toBe('writer_request');
    expect(writerRequests.length).toBe(requestsBefore);
    maybeSaveHistory('paper-writer-request-held.paper-evidence-secrets', await fetchRunHistory(`paper:${paperId}`));
    // The run record itself is the agent's text; what the service wrote must not hold the key.
    await h.t.store.query(`UPDATE runs SET decision_summary = 'redacted by the test' WHERE run_id = $1`, [paperId.split(':')[1]]);
    await expectNoSecretAnywhere([live.body]);
  });
});

describe('a rewrite and a package refuse evidence that came to hold the service secrets', () => {
  it('a token written into the notes while the writer writes: the draft is not recorded, the paper is held', { timeout: 60_000 }, async () => {
    const paperId = await h.completedRun('while-writing', { finishedAt: '2026-01-03T12:00:00Z' });
    whileWriting = () => appendFile(projectFile('while-writing', 'run_notes.md'), `\ncallback token: ${CALLBACK_TOKEN}\n`);
    let live;
    try {
      live = await draftNext({ dry_run: false });
    } finally {
      whileWriting = null;
    }
    expect(live.status, JSON.stringify(live.body)).toBe(409);
    expect(live.body.detail.message).toContain('"run_notes.md" (completion_callback_token)');
    const { paper, event } = await expectHeld(paperId, 'run_notes.md', 'completion_callback_token');
    expect(event.payload.stage).toBe('paper_step');
    expect(paper.draft_count).toBe(0);
    await expectNoSecretAnywhere([live.body]);
  });

  it('rewrite-draft: 409 naming the file, the paper held, the writer never sent the key; rewrite-batch reports it held', { timeout: 90_000 }, async () => {
    const paperId = await draftClean('rewrite-key', '2026-01-04T00:00:00Z');
    expect(writerRequests.at(-1)!.body).toContain('0.912');
    await appendFile(projectFile('rewrite-key', 'run_notes.md'), `\nPAPER_WRITER_API_KEY=${WRITER_KEY}\n`);
    const requestsBefore = writerRequests.length;
    const rewrite = await h.call('POST', `/control/api/publication-automation/${path(paperId)}/rewrite-draft`, { idempotency_key: 'rewrite-key-1', requested_by: 'secret-test' });
    expect(rewrite.status, JSON.stringify(rewrite.body)).toBe(409);
    expect(rewrite.body.detail.message).toMatch(/^the rewrite was refused/);
    expect(rewrite.body.detail.message).toContain('"run_notes.md" (paper_writer_api_key)');
    await expectHeld(paperId, 'run_notes.md', 'paper_writer_api_key');

    const batch = await h.call('POST', '/control/api/paper-reviews/rewrite-batch', { idempotency_key: 'rewrite-key-batch', requested_by: 'secret-test', search: 'rewrite-key' });
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    expect(batch.body.results).toEqual([expect.objectContaining({ outcome: 'held_for_review', paper_id: paperId, secrets: [expect.objectContaining({ file: 'run_notes.md' })] })]);
    expect(batch.body.rewritten).toBe(0);
    expect(writerRequests.length).toBe(requestsBefore);
    await expectNoSecretAnywhere([rewrite.body, batch.body]);
  });

  it('prepare-finalization-package: an approved paper whose evidence now holds the gate token gets no package, loses its approval and is held', { timeout: 90_000 }, async () => {
    const paperId = await draftClean('package-token', '2026-01-05T00:00:00Z');
    const approved = await h.call('POST', `/control/api/publication-automation/${path(paperId)}/checklist/final_human_approval`, { idempotency_key: 'approve-package-token', requested_by: 'reviewer', status: 'pass' });
    expect(approved.status).toBe(200);
    const url = `/control/api/publication-automation/${path(paperId)}/prepare-finalization-package`;
    const clean = await h.call('POST', url, { idempotency_key: 'package-dry', requested_by: 'reviewer', target_label: 'corpus', dry_run: true });
    expect(clean.body, JSON.stringify(clean.body)).toMatchObject({ ok: true, ready: true });

    await writeFile(projectFile('package-token', 'results/main/metrics.json'), JSON.stringify({ accuracy: 0.912, loss: 0.31, token: TEST_GATE_TOKEN }));
    const dry = await h.call('POST', url, { idempotency_key: 'package-dry-2', requested_by: 'reviewer', target_label: 'corpus', dry_run: true });
    expect(dry.status, JSON.stringify(dry.body)).toBe(409);
    expect((await paperState(paperId)).events).toEqual([]);

    const live = await h.call('POST', url, { idempotency_key: 'package-live', requested_by: 'reviewer', target_label: 'corpus' });
    expect(live.status, JSON.stringify(live.body)).toBe(409);
    expect(live.body.detail.message).toMatch(/^the finalization package was refused/);
    expect(live.body.detail.message).toContain('"evidence/results/main/metrics.json" (worker_wake_gate_bearer_token)');
    const { event } = await expectHeld(paperId, 'evidence/results/main/metrics.json', 'worker_wake_gate_bearer_token');
    expect(event.payload.stage).toBe('package');
    expect(event.payload.review_status).toEqual({ from: 'unreviewed', to: 'blocked' });
    expect(existsSync(join(h.settings.stateDir, 'papers', paperId, 'packages'))).toBe(false);
    const packages = await h.t.store.query('SELECT 1 FROM paper_finalization_packages WHERE paper_id = $1', [paperId]);
    expect(packages.rowCount).toBe(0);
    await expectNoSecretAnywhere([clean.body, dry.body, live.body]);
  });
});
