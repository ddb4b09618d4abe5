import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reserveControlPlane, startControlPlaneProcess, writeControlPlaneConfig, type ControlPlaneFixture, type ControlPlaneProcess } from '../support/control-plane.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { CALLBACK_TOKEN, CONTROL_TOKEN, FAKE_AGENT_PATH, GATE_TOKEN, waitUntil } from '../support/gate.ts';
import { testPort } from '../support/ports.ts';
import { candidate } from '../support/research.ts';

// expected duration: ~60 s

/**
 * The contract judged on real traffic by a validator no one here wrote: Prism (`@stoplight/prism-cli`) in proxy mode
 * in front of a single-machine install (both roles in one process, on Postgres and the run's Temporal dev server).
 * A journey calls every operation of the served document through it: the flow of docs/papers.md#from-a-run-to-an-imported-paper from an imported candidate
 * to an imported paper with the simulated agent, every read, the operator commands, Core, the dashboard and the
 * worker gate. The control plane's own calls to its gate (prepare, dispatch, cancel) and the gate's completion
 * callbacks go through Prism too. Any request or answer Prism finds outside the document fails the test.
 *
 * Two kinds of exchange cannot go through Prism 5's proxy, and go to the server directly, held to the document here (a
 * documented status, its documented content type and headers): HEAD of a JSON route (the proxy parses every JSON
 * answer's body, a HEAD answer has none, and it answers 500 itself), and the redirects (the proxy follows them and
 * judges the page they lead to against the redirect's operation).
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PRISM = join(ROOT, 'node_modules', '.bin', 'prism');

interface Operation {
  method: string;
  path: string;
  operation: Record<string, any>;
}

interface Exchange {
  operationId: string;
  method: string;
  url: string;
  status: number;
  violations: string;
  /** Sent straight to the server, judged by directViolations. */
  direct: boolean;
}

let database: TestDatabase;
let fixture: ControlPlaneFixture;
let controlPlane: ControlPlaneProcess;
let prism: ChildProcess;
let prismOutput = '';
let prismUrl: string;
let dir: string;
let document: Record<string, any>;
const operations = new Map<string, Operation>();
const exchanges: Exchange[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rcp-prism-'));
  database = await createTestDatabase();
  const reserved = await reserveControlPlane();
  prismUrl = `http://127.0.0.1:${await testPort()}`;
  fixture = await writeControlPlaneConfig(reserved, {
    databaseUrl: database.url,
    // The control plane reaches its own gate role through Prism, and the gate calls back through it.
    gateUrl: prismUrl,
    overrides: {
      roles: ['control_plane', 'worker_gate'],
      completion_callback_url: `${prismUrl}/control/api/worker-callback`,
      completion_callback_timeout_sec: 5,
      dispatch_script_path: FAKE_AGENT_PATH,
      sample_interval_sec: 1,
      idle_sustain_sec: 30,
      cpu_idle_threshold_pct: 100,
      gpu_idle_avg_threshold_pct: 100,
      gpu_idle_peak_threshold_pct: 100,
      vram_delta_threshold_mib: 1_000_000,
    },
  });
  controlPlane = await startControlPlaneProcess(fixture);
  const served = await fetch(`${fixture.url}/control/api/openapi.json`, { headers: { authorization: `Bearer ${CONTROL_TOKEN}` } });
  expect(served.status).toBe(200);
  document = (await served.json()) as Record<string, any>;
  for (const [path, methods] of Object.entries(document.paths as Record<string, Record<string, any>>)) {
    for (const [method, operation] of Object.entries(methods)) {
      if (typeof operation === 'object' && operation?.operationId) operations.set(operation.operationId as string, { method: method.toUpperCase(), path, operation });
    }
  }
  const documentPath = join(dir, 'openapi.json');
  await writeFile(documentPath, JSON.stringify(document));
  prism = spawn(PRISM, ['proxy', documentPath, fixture.url, '--host', '127.0.0.1', '--port', new URL(prismUrl).port], { stdio: ['ignore', 'pipe', 'pipe'] });
  prism.stdout!.on('data', (chunk: Buffer) => (prismOutput += chunk.toString()));
  prism.stderr!.on('data', (chunk: Buffer) => (prismOutput += chunk.toString()));
  await waitUntil('Prism to listen', () => (prismOutput.includes('Prism is listening') ? true : prism.exitCode !== null ? Promise.reject(new Error(`prism exited: ${prismOutput}`)) : undefined), 90_000, 100);
}, 180_000);

afterAll(async () => {
  prism?.kill('SIGTERM');
  if (controlPlane && controlPlane.child.exitCode === null) {
    controlPlane.child.kill('SIGTERM');
    await controlPlane.exited;
  }
  await database?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
  if (fixture) await rm(fixture.dir, { recursive: true, force: true });
});

interface CallOptions {
  params?: Record<string, string>;
  query?: Record<string, string>;
  body?: unknown;
  headers?: Record<string, string>;
  /** The bearer token sent; null: none. Default: the control API's. */
  bearer?: string | null;
  /** Straight to the server instead of through Prism. */
  direct?: boolean;
}

/** The URL of an operation, its path parameters filled in. */
function urlOf(operationId: string, options: CallOptions): { operation: Operation; url: string } {
  const operation = operations.get(operationId);
  if (!operation) throw new Error(`the document has no operation ${operationId}`);
  const path = operation.path.replace(/\{(\w+)\}/g, (_whole, name: string) => {
    const value = options.params?.[name];
    if (value === undefined) throw new Error(`${operationId} needs the path parameter ${name}`);
    return encodeURIComponent(value);
  });
  const query = options.query ? `?${new URLSearchParams(options.query)}` : '';
  return { operation, url: `${path}${query}` };
}

/** What the document says of an answer Prism cannot judge: its status, content type and headers, as Prism would. */
function directViolations({ operation }: Operation, response: Response): string {
  const documented = operation.responses[String(response.status)] as { content?: Record<string, unknown>; headers?: Record<string, unknown> } | undefined;
  if (!documented) return `status ${response.status} is not documented`;
  const problems: string[] = [];
  const types = Object.keys(documented.content ?? {}).map((type) => type.split(';')[0]);
  const sent = (response.headers.get('content-type') ?? '').split(';')[0]!;
  if (types.length > 0 && !types.includes(sent)) problems.push(`content type ${sent} is not one of ${types.join(', ')}`);
  // Every header documented for these answers is one the server always sets (X-Request-Id, Location on a redirect).
  for (const name of Object.keys(documented.headers ?? {})) if (!response.headers.has(name)) problems.push(`the documented header ${name} is missing`);
  return problems.join('; ');
}

/** Calls one operation through Prism (or straight to the server) and keeps what was found wrong with the exchange. */
async function call(operationId: string, options: CallOptions = {}) {
  const { operation, url } = urlOf(operationId, options);
  const bearer = options.bearer === undefined ? CONTROL_TOKEN : options.bearer;
  const headers: Record<string, string> = { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...options.headers };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${options.direct ? fixture.url : prismUrl}${url}`, {
    method: operation.method,
    headers,
    redirect: 'manual',
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });
  const text = await response.text();
  const violations = options.direct ? directViolations(operation, response) : (response.headers.get('sl-violations') ?? '');
  exchanges.push({ operationId, method: operation.method, url, status: response.status, violations, direct: options.direct === true });
  let body: any = text;
  if ((response.headers.get('content-type') ?? '').includes('json') && text) body = JSON.parse(text);
  return { status: response.status, headers: response.headers, body };
}

/** Calls an operation that must succeed (2xx or a documented redirect), and answers its body. */
async function ok(operationId: string, options: CallOptions = {}) {
  const answer = await call(operationId, options);
  expect(answer.status, `${operationId}: ${JSON.stringify(answer.body).slice(0, 800)}`).toBeLessThan(400);
  return answer.body;
}


const by = { requested_by: 'journey' };

/** Operations (method and path template) Prism's log says it received. */
function operationsThroughPrism(): Set<string> {
  const seen = new Set<string>();
  const templates = [...operations.values()].map((op) => ({ op, pattern: new RegExp(`^${op.path.replace(/\{\w+\}/g, '[^/]+')}$`) }));
  for (const match of prismOutput.matchAll(/\[HTTP SERVER\] (\w+) (\S+) .*Request received/g)) {
    const method = match[1]!.toUpperCase();
    const path = match[2]!.split('?')[0]!;
    const found = templates.find(({ op, pattern }) => op.method === method && pattern.test(path));
    if (found) seen.add(found.op.operation.operationId as string);
  }
  return seen;
}

describe('the contract on real traffic, judged by Prism', () => {
  it('holds for a journey that calls every operation', { timeout: 300_000 }, async () => {
    // This document, health and the routes' own figures
    for (const id of ['getOpenApiDocument', 'getMetrics', 'getRouteObservability', 'getMemory', 'getHealth']) await ok(id);
    await ok('getLiveness', { bearer: null });

    // A dashboard session: its cookie stands in for the bearer on reads
    const signedIn = await call('signIn', { bearer: null, body: { token: CONTROL_TOKEN } });
    expect(signedIn.status).toBe(200);
    const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0]!;
    expect(cookie).toContain('=');
    await ok('getSession', { bearer: null, headers: { cookie } });
    await ok('signOut', { headers: { cookie } });

    // The Research Facility: candidates in, one promoted
    await ok('getResearchFacility');
    const imported = await ok('importCandidates', {
      body: { ...by, dry_run: false, candidates: [candidate({ title: 'Journey paper', dedupe_key: 'journey-paper' }), candidate({ title: 'Journey spare', dedupe_key: 'journey-spare', hypothesis: 'A second method also beats its baseline.' })] },
    });
    const [candidateId, spareId] = (imported.results as { candidate_id: string }[]).map((result) => result.candidate_id);
    expect(candidateId).toEqual(expect.any(String));
    await ok('listCandidates', { query: { page_size: '10' } });
    await ok('getCandidate', { params: { candidate_id: candidateId! } });
    await ok('generateSmokeBatch', { body: { ...by, dry_run: true } });
    await call('getProviderBudget');
    await call('generateProviderBatch', { body: { ...by, dry_run: true } });
    await ok('promoteCandidate', { body: { ...by, candidate_id: candidateId, dry_run: false, idempotency_key: 'promote-journey' } });
    await ok('promoteCandidate', { body: { ...by, candidate_id: spareId, dry_run: false, idempotency_key: 'promote-spare' } });
    await ok('launchNextFollowup', { body: { ...by, dry_run: true } });

    // The queue, its health, and the operator's commands
    await ok('listQueueGroup', { params: { queue: 'queued' }, query: { sort: 'dispatch_priority' } });
    await ok('getStatus');
    await ok('getQueueHealth');
    await ok('checkQueueAlerts', { body: { dry_run: true } });
    await ok('pauseQueue', { body: { reason: 'journey', paused_by: 'journey' } });
    await ok('resumeQueue', { body: { resumed_by: 'journey' } });
    await ok('preflightWorker', { body: {} });

    // A live run with the simulated agent: prepared, dispatched and completed through the gate role, behind Prism
    const planned = await ok('dispatchNext', { body: { ...by, dry_run: true } });
    const projectId = planned.candidate.project_id as string;
    const spareProject = ((await ok('listQueue', { query: { group: 'queued', page_size: '50' } })).items as { project_id: string }[]).find((item) => item.project_id !== projectId)!.project_id;
    await ok('parkQueueItem', { body: { project_id: spareProject, reason: 'journey', updated_by: 'journey' } });
    await ok('requeueItem', { body: { project_id: spareProject, ...by } });
    await ok('parkQueueItem', { body: { project_id: spareProject, reason: 'not in this journey', updated_by: 'journey' } });
    const projectDir = join(fixture.dir, 'projects', planned.candidate.project_dir ?? projectId);
    await mkdir(projectDir, { recursive: true });
    await writeFile(join(projectDir, 'scenario.json'), JSON.stringify({ scenario: 'normal', decision: 'finalize_positive', results: { accuracy: 0.934, loss: 0.208 } }));
    const live = await ok('dispatchNext', { body: { ...by, dry_run: false, idempotency_key: 'journey-dispatch' } });
    expect(live.action, JSON.stringify(live)).toBe('live_dispatch');
    const runId = live.run_id as string;
    await ok('getRun', { params: { run_id: runId } });
    await ok('getRunGateView', { params: { run_id: runId } });
    await ok('getProjectUnversioned', { params: { project_id: projectId } });
    await ok('gateGetDashboard', { bearer: GATE_TOKEN });
    await ok('gateProveIdentity', { bearer: null, query: { challenge: 'journey-challenge-0123456789abcdef' } });
    await ok('gateRecordAgentEvent', { body: { event: 'session-start', run_id: 'journey-no-such-run' } });
    await call('gatePrepareProject', {
      bearer: GATE_TOKEN,
      body: { run_id: 'journey-direct-1', project_id: 'journey-direct', project_dir: 'journey-direct', prompt_file: 'PROMPT.md', prompt_text: 'Nothing to do.' },
    });
    await call('gateCancelRun', { bearer: GATE_TOKEN, params: { run_id: 'journey-no-such-run' } });
    await call('gateResumeRun', { bearer: GATE_TOKEN, params: { run_id: 'journey-no-such-run' }, body: { resume_id: 'answer-1', prompt: 'Use the test split.', allowed_tools: [] } });
    await call('cancelRun', { params: { run_id: 'journey-no-such-run' }, body: { ...by, reason: 'journey' } });
    // The journey's run asks nothing: the answer is refused (409), as the document says it may be.
    await call('answerRun', { params: { run_id: runId }, body: { ...by, idempotency_key: 'journey-answer', answer: 'Use the test split.' } });
    // Nor does it wait out a usage limit: the early resume is refused (409) too.
    await call('resumeRun', { params: { run_id: runId }, body: { ...by, idempotency_key: 'journey-resume' } });
    await call('receiveWorkerCallback', {
      bearer: CALLBACK_TOKEN,
      body: {
        event_type: 'session_finished_ready',
        run_id: 'journey-no-such-run',
        session_id: null,
        project_id: 'journey-direct',
        gate_state: 'finished_ready',
        reason: 'journey',
        idle_seen_at: null,
        seen_at: new Date().toISOString(),
        delivered_at: null,
        telemetry: {},
        process_tracking: {},
        idempotency_key: 'journey-callback',
      },
    });
    await waitUntil(
      'the run to complete',
      async () => ((await fetch(`${fixture.url}/control/api/v1/runs/${runId}`, { headers: { authorization: `Bearer ${CONTROL_TOKEN}` } }).then((r) => r.json())) as any).run?.state === 'reconciled' || undefined,
      150_000,
      1_000,
    );
    // Its result files, through the control plane and on the gate itself.
    const files = await ok('listRunFiles', { params: { run_id: runId } });
    expect(files.files.map((file: { path: string }) => file.path)).toContain('results/main/metrics.json');
    await ok('getRunFile', { params: { run_id: runId }, query: { path: 'results/main/metrics.json' } });
    await ok('gateListRunFiles', { bearer: GATE_TOKEN, params: { run_id: runId } });
    await ok('gateGetRunFile', { bearer: GATE_TOKEN, params: { run_id: runId }, query: { path: 'run_notes.md' } });
    // Its transcript, which the gate pushed through Prism: a page, and the stream, which ends at once for a finished run.
    const transcript = await ok('getRunTranscript', { params: { run_id: runId }, query: { limit: '2' } });
    expect(transcript.entries.length, JSON.stringify(transcript)).toBeGreaterThan(0);
    await waitUntil('the run to have finished 3 s ago', async () => (Date.now() - Date.parse(transcript.run_updated_at as string) > 3_500) || undefined, 10_000, 250);
    await ok('streamRunTranscript', { params: { run_id: runId }, query: { after: '1' } });

    // A paper drafted from the run, reviewed, packaged and its import recorded, through both review prefixes
    await ok('draftNextPaper', { body: { ...by, dry_run: true } });
    const drafted = await ok('draftNextPaper', { body: { ...by, dry_run: false } });
    const paperId = drafted.paper_id as string;
    expect(paperId, JSON.stringify(drafted)).toEqual(expect.any(String));
    const paper = { paper_id: paperId };
    await ok('listReviews', { query: { include_rank_reasons: '1' } });
    await ok('listReviewsAlias');
    await ok('getNextReview', { query: { paper_status: 'draft_review' } });
    await ok('getNextReviewAlias', { query: { paper_status: 'draft_review' } });
    await ok('rewriteDraft', { params: paper, body: { ...by, idempotency_key: 'rewrite-1' } });
    await ok('rewriteDraftAlias', { params: paper, body: { ...by, idempotency_key: 'rewrite-2', force: true } });
    await ok('rewriteBatch', { body: { ...by, idempotency_key: 'batch-1', dry_run: true } });
    await ok('rewriteBatchAlias', { body: { ...by, idempotency_key: 'batch-2', dry_run: true } });
    await ok('setReviewStatus', { params: paper, body: { ...by, idempotency_key: 'move-1', review_status: 'triage_ready' } });
    await ok('setReviewStatusAlias', { params: paper, body: { ...by, idempotency_key: 'move-2', review_status: 'in_review' } });
    await ok('setChecklistItemAlias', { params: { ...paper, item_id: 'final_human_approval' }, body: { ...by, idempotency_key: 'check-1', status: 'fail', note: 'not yet' } });
    await ok('setChecklistItem', { params: { ...paper, item_id: 'final_human_approval' }, body: { ...by, idempotency_key: 'check-2', status: 'pass' } });
    await ok('approveFinalizationAlias', { params: paper, body: { ...by, idempotency_key: 'approve-1' } });
    await call('approveFinalization', { params: paper, body: { ...by, idempotency_key: 'approve-2' } });
    await ok('prepareFinalizationPackageAlias', { params: paper, body: { ...by, idempotency_key: 'package-1', target_label: 'journey', dry_run: true } });
    const packaged = await ok('prepareFinalizationPackage', { params: paper, body: { ...by, idempotency_key: 'package-2', target_label: 'journey' } });
    await ok('recordCorpusImport', {
      params: paper,
      body: { ...by, idempotency_key: 'import-1', corpus_repo: 'lab/papers', commit_sha: 'deadbeef1', manifest_sha256: packaged.manifest_sha256 },
    });

    // Every read, on the ledgers the journey filled
    await ok('listEvents', { query: { page_size: '50' } });
    await ok('listEventsByPage', { query: { page_size: '50' } });
    await ok('listPapersByPage');
    await ok('listQueue');
    await ok('listRuns');
    await ok('listProjects');
    await ok('listPapers');
    await ok('getProject', { params: { project_id: projectId } });
    await ok('getPaper', { params: paper });
    await ok('getPaperDraft', { params: paper });
    await ok('getOverview');
    await ok('listLanes');
    await ok('whyNothingMoves');
    await ok('getAutomationReadiness');
    await ok('getResearchQuality');
    await ok('listSourceLineage');
    await call('getLegacyNotesIntake');

    // Core: a queue snapshot in, its projection out
    await ok('getCoreHealth');
    await ok('ingestQueueSnapshot', {
      body: { idempotency_key: 'snapshot-1', source: 'journey', queue_rows: [{ project_id: 'core-1', status: 'queued' }], paper_rows: [] },
    });
    await ok('getQueueProjection', { query: { source: 'journey' } });

    // A bounded research cycle that may do nothing, followed to its end
    const cycle = await ok('runCycle', {
      body: { ...by, enabled: true, dry_run: false, idempotency_key: 'cycle-1', max_provider_requests_per_run: 0, max_promotions_per_run: 0, max_dispatches_per_run: 0, max_paper_drafts_per_run: 0, max_publication_rewrites_per_run: 0 },
    });
    expect(cycle.run_cycle_id, JSON.stringify(cycle)).toEqual(expect.any(String));
    await ok('getCycle', { params: { run_cycle_id: cycle.run_cycle_id as string } });

    // The dashboard
    const page = (await ok('getDashboard', { bearer: null })) as string;
    const asset = /\/control\/dashboard-v2\/assets\/([\w.-]+)/.exec(page)?.[1];
    expect(asset, 'the dashboard page names an asset').toBeDefined();
    await ok('getDashboardAsset', { bearer: null, params: { file: asset! } });
    await ok('redirectToDashboard', { bearer: null, direct: true });
    await ok('redirectShortPathToDashboard', { bearer: null, direct: true });
    await ok('getFavicon', { bearer: null });

    // HEAD of every GET, on the same URL as its GET
    const gets = new Map(exchanges.filter((exchange) => exchange.method === 'GET').map((exchange) => [exchange.operationId, exchange]));
    for (const [id, { method }] of operations) {
      if (method !== 'HEAD') continue;
      const get = gets.get(id.replace(/Headers$/, ''));
      expect(get, `a GET for ${id}`).toBeDefined();
      const getTypes = Object.keys(operations.get(get!.operationId)!.operation.responses[String(get!.status)]?.content ?? {});
      const direct = get!.direct || getTypes.some((type) => type.includes('json'));
      const headers = { authorization: `Bearer ${get!.operationId === 'gateGetDashboard' ? GATE_TOKEN : CONTROL_TOKEN}` };
      const response = await fetch(`${direct ? fixture.url : prismUrl}${get!.url}`, { method: 'HEAD', headers, redirect: 'manual' });
      const violations = direct ? directViolations(operations.get(id)!, response) : (response.headers.get('sl-violations') ?? '');
      exchanges.push({ operationId: id, method: 'HEAD', url: get!.url, status: response.status, violations, direct });
    }

    // Prism's judgement: no violation on any exchange, of the journey's or between the roles
    const violations = exchanges.filter((exchange) => exchange.violations).map((exchange) => `${exchange.method} ${exchange.url} ${exchange.status}: ${exchange.violations}`);
    expect(violations).toEqual([]);
    const reported = prismOutput.split('\n').filter((line) => /\[VALIDATOR\]|terminated with error|✖|⚠/.test(line));
    expect(reported).toEqual([]);
    // The roles' own calls went through Prism too: the gate's completion callbacks besides the journey's one.
    const callbacksThroughPrism = [...prismOutput.matchAll(/\[HTTP SERVER\] post \/control\/api\/worker-callback /g)].length;
    expect(callbacksThroughPrism).toBeGreaterThan(exchanges.filter((exchange) => exchange.operationId === 'receiveWorkerCallback').length);
    const covered = operationsThroughPrism();
    for (const exchange of exchanges) if (exchange.direct) covered.add(exchange.operationId);
    expect([...operations.keys()].filter((id) => !covered.has(id))).toEqual([]);
  });
});
