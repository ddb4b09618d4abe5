import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { answerJson, chatCompletion, FakeProvider, PROVIDER_API_KEY, quotaBody } from '../support/fake-provider.ts';
import { jsonClient, tableCounts } from '../support/ledgers.ts';
import { candidate } from '../support/research.ts';
import { closedUrl } from '../support/receiver.ts';

/**
 * Provider-backed generation against a real local provider (quota endpoint and chat/completions) and real Postgres:
 * fail-closed budget, exactly one request per live batch, validation of what the provider proposes, the request
 * ledger, idempotency, and the provider's failures.
 */

const SOURCE = { source_id: 'src-provider-1', kind: 'paper', title: 'Block-sparse attention revisited' };

/** A complete candidate citing the stored source, with text of its own (so the planner does not merge it with the seed). */
const proposal = (overrides: Record<string, unknown> & { dedupe_key: string }) =>
  candidate({
    generation_mode: 'implementation_gap',
    source_ids: [SOURCE.source_id],
    title: `Quantised KV cache study ${overrides.dedupe_key}`,
    hypothesis: `An 4-bit KV cache keeps perplexity within 1% of fp16 at 8k tokens for ${overrides.dedupe_key}.`,
    mechanism: 'Group-wise quantisation of keys and values with per-group scales, dequantised on the fly inside attention.',
    ...overrides,
  });


let provider: FakeProvider;
let t: TestApp;
beforeAll(async () => {
  provider = await FakeProvider.start();
  t = await startTestApp({ researchProvider: provider.settings() });
  // The source the provider's candidates cite, stored through the import route.
  const seeded = await jsonClient(t).post('/control/api/research/import-candidates', {
    candidates: [candidate({ dedupe_key: 'seed-candidate', source_ids: [SOURCE.source_id] })],
    sources: [SOURCE],
    dry_run: false,
    requested_by: 'seed@test',
  });
  expect(seeded.status).toBe(200);
});
afterAll(async () => {
  await t.close();
  await provider.close();
});
afterEach(() => {
  provider.quota = quotaBody();
  provider.quotaStatus = 200;
  provider.proposes([]);
  provider.chats.length = 0;
});

const post = (payload: Record<string, unknown>) => jsonClient(t).post('/control/api/research/generate-provider-batch', { requested_by: 'operator@test', ...payload });
const live = (key: string, extra: Record<string, unknown> = {}) => post({ dry_run: false, idempotency_key: key, ...extra });
const budget = async () => (await jsonClient(t).get('/control/api/research/provider-budget')).body;

async function withApp<T>(settings: Parameters<typeof startTestApp>[0], use: (app: TestApp) => Promise<T>): Promise<T> {
  const app = await startTestApp(settings);
  try {
    return await use(app);
  } finally {
    await app.close();
  }
}

describe('the budget is fail-closed: nothing is spent or written when it blocks', () => {
  const blockedCases: [string, () => void, RegExp][] = [
    ['low remaining credit', () => (provider.quota = quotaBody(4, 100)), /remaining credit 4 is below research_provider_min_remaining_credits \(5\)/],
    ['a window inside the request reserve', () => (provider.quota = quotaBody(50, 10)), /10 request\(s\) left .* 11 needed/],
    ['a quota endpoint answering 500', () => (provider.quotaStatus = 500), /quota could not be read: .* answered 500/],
    ['a quota body of another shape', () => (provider.quota = { credits: 'plenty' }), /did not answer the quota shape/],
  ];

  it.each(blockedCases)('%s: live is refused with the reason, dry run says why, no request is sent', async (_name, arrange, reason) => {
    arrange();
    provider.proposes([proposal({ dedupe_key: 'never-sent' })]);
    const before = await tableCounts(t.store);
    const dry = await post({});
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ ok: false, action: 'dry_run_provider_generation', dry_run: true });
    expect(dry.body.reason).toMatch(reason);
    const refused = await live(`blocked-${Math.random()}`);
    expect(refused.status).toBe(200);
    expect(refused.body).toMatchObject({ ok: false, action: 'provider_generation_blocked', dry_run: false, budget: { ok: false } });
    expect(refused.body.reason).toMatch(reason);
    expect(provider.chats).toHaveLength(0);
    expect(await tableCounts(t.store)).toEqual(before);
    expect(await budget()).toMatchObject({ ok: false });
  });

  it('an unreachable quota endpoint blocks, and so does a provider that is not configured', async () => {
    const quotaUrl = `${new URL(await closedUrl()).origin}/quota`;
    await withApp({ researchProvider: provider.settings({ quota_url: quotaUrl }) }, async (app) => {
      const answer = await jsonClient(app).post('/control/api/research/generate-provider-batch', { dry_run: false, idempotency_key: 'k-unreachable', requested_by: 'operator@test' });
      expect(answer.body).toMatchObject({ ok: false, action: 'provider_generation_blocked' });
      expect(answer.body.reason).toMatch(/quota could not be read: no answer from http:\/\/127\.0\.0\.1:\d+\/quota: ECONNREFUSED/);
    });
    await withApp({}, async (app) => {
      const answer = await jsonClient(app).get('/control/api/research/provider-budget');
      expect(answer.body).toMatchObject({ ok: false, remaining_credits: null, window: null, requests_last_24h: 0 });
      expect(answer.body.reason).toMatch(/not configured \(set research_provider_base_url, research_provider_model, research_provider_quota_url\)/);
    });
    expect(provider.chats).toHaveLength(0);
  });

  it('a dry run with budget reads only the quota, sends no request and writes nothing', async () => {
    const before = await tableCounts(t.store);
    const quotaReads = provider.quotaReads.length;
    const dry = await post({ count: 3 });
    expect(dry.body).toMatchObject({ ok: true, action: 'dry_run_provider_generation', count: 3, budget: { ok: true, remaining_credits: 50 } });
    expect(dry.body.reason).toMatch(/would ask research-model-1 for at most 3 candidate\(s\) in one request/);
    expect(provider.quotaReads.length).toBe(quotaReads + 1);
    expect(provider.quotaReads.at(-1)!.headers.authorization).toBe(`Bearer ${PROVIDER_API_KEY}`);
    expect(provider.chats).toHaveLength(0);
    expect(await tableCounts(t.store)).toEqual(before);
  });
});

describe('a live batch', () => {
  it('sends exactly one request, stores valid candidates with queue_admitted false, reports invalid ones, and ledgers the request', async () => {
    provider.proposes([
      proposal({ dedupe_key: 'provider-good-one' }),
      { title: 'No scores at all', generation_mode: 'moonshot', dedupe_key: 'provider-malformed' },
      proposal({ dedupe_key: 'provider-unknown-source', source_ids: ['src-nowhere'] }),
      proposal({ dedupe_key: 'provider-operator-mode', generation_mode: 'manual_import' }),
    ]);
    const answer = await live('live-batch-1', { count: 4 });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ ok: true, action: 'provider_generation', dry_run: false, counts: { admitted: 1 } });
    expect(provider.chats).toHaveLength(1);
    const sent = JSON.parse(provider.chats[0]!.body);
    expect(sent.model).toBe('research-model-1');
    expect(sent.messages.at(-1).content).toMatch(/at most 4 candidate/);
    expect(sent.messages.at(-1).content).toContain(SOURCE.source_id);
    expect(provider.chats[0]!.headers.authorization).toBe(`Bearer ${PROVIDER_API_KEY}`);

    expect(answer.body.invalid.map((entry: { index: number }) => entry.index)).toEqual([1, 2, 3]);
    expect(answer.body.invalid[0].problems.join(' ')).toMatch(/novelty/);
    expect(answer.body.invalid[1].problems).toEqual(["source_ids: unknown source 'src-nowhere'"]);
    expect(answer.body.invalid[2].problems.join(' ')).toMatch(/manual_import is for operators/);
    expect(answer.body.provider).toMatchObject({ outcome: 'ok', http_status: 200, prompt_tokens: 900, completion_tokens: 400, total_tokens: 1300, cost: 0.0042 });

    const stored = await t.store.query<{ dedupe_key: string; queue_admitted: boolean }>(
      `SELECT dedupe_key, queue_admitted FROM research_candidates WHERE batch_id = $1 ORDER BY dedupe_key`,
      [answer.body.batch_id],
    );
    expect(stored.rows).toEqual([{ dedupe_key: 'provider-good-one', queue_admitted: false }]);
    const runtime = await t.store.query(`SELECT 1 FROM projects WHERE candidate_id IN (SELECT candidate_id FROM research_candidates WHERE batch_id = $1)`, [answer.body.batch_id]);
    expect(runtime.rowCount).toBe(0);

    const ledger = await t.store.query<{ outcome: string; total_tokens: number; cost: number; batch_id: string }>('SELECT outcome, total_tokens, cost::float8 AS cost, batch_id FROM provider_requests');
    expect(ledger.rows).toEqual([{ outcome: 'ok', total_tokens: 1300, cost: 0.0042, batch_id: answer.body.batch_id }]);
    expect((await budget()).requests_last_24h).toBe(1);
    await expect(t.store.query('DELETE FROM provider_requests')).rejects.toThrow(/append-only/);

    // The same key and payload answer the first result without a second request; another payload is a conflict.
    const replay = await live('live-batch-1', { count: 4 });
    expect(replay.body).toEqual(answer.body);
    expect(provider.chats).toHaveLength(1);
    const conflict = await live('live-batch-1', { count: 2 });
    expect(conflict.status).toBe(409);

    expect(t.logs.text).not.toContain(PROVIDER_API_KEY);
    expect(JSON.stringify(answer.body)).not.toContain(PROVIDER_API_KEY);
  });

  it('refuses a proposed parent lineage and text Postgres cannot store, and stores neither', async () => {
    provider.proposes([
      proposal({ dedupe_key: 'provider-claims-parent', parent_run_id: 'someone-20260101T000000Z' }),
      proposal({ dedupe_key: 'provider-nul-title', title: 'a title with a \u0000 in it' }),
    ]);
    const answer = await live('live-batch-refused', { count: 2 });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.invalid).toEqual([
      { index: 0, problems: [expect.stringMatching(/names no parent run or project/)] },
      { index: 1, problems: [expect.stringMatching(/cannot be stored/)] },
    ]);
    expect(answer.body.written).toEqual({ sources: 0, candidates: 0, admissions: 0, lineage: 0 });
  });

  it('needs an idempotency key', async () => {
    const answer = await post({ dry_run: false });
    expect(answer.status).toBe(422);
    expect(answer.body.detail[0].loc).toEqual(['body', 'idempotency_key']);
    expect(provider.chats).toHaveLength(0);
  });

  const failures: [string, number, string, () => void][] = [
    ['content that is not JSON', 502, 'malformed_output', () => (provider.chat = answerJson(200, chatCompletion('Here are some ideas: sparse attention!')))],
    ['an answer without choices', 502, 'malformed_output', () => (provider.chat = answerJson(200, '{"error": "oops"}'))],
    ['429 Too Many Requests', 502, 'rate_limited', () => (provider.chat = answerJson(429, { error: { message: 'slow down' } }))],
    ['a provider that never answers', 504, 'timeout', () => (provider.chat = () => undefined)],
  ];

  it.each(failures)('%s: answered %d, the request is ledgered, nothing is stored, the key can be sent again', async (_name, status, outcome, arrange) => {
    const app = await startTestApp({ researchProvider: provider.settings({ timeout_ms: 400 }) });
    try {
      arrange();
      const client = jsonClient(app);
      const key = `failing-${outcome}`;
      const send = () => client.post('/control/api/research/generate-provider-batch', { dry_run: false, idempotency_key: key, requested_by: 'operator@test' });
      const failed = await send();
      expect(failed.status).toBe(status);
      expect(failed.body.detail).toMatchObject({ outcome });
      expect(failed.body.detail.message).toMatch(new RegExp(`request failed \\(${outcome}\\)`));
      const ledger = await app.store.query<{ outcome: string }>('SELECT outcome FROM provider_requests');
      expect(ledger.rows).toEqual([{ outcome }]);
      expect((await app.store.query('SELECT 1 FROM research_candidates')).rowCount).toBe(0);
      expect(JSON.stringify(failed.body)).not.toContain(PROVIDER_API_KEY);

      // The fresh database has no sources: the retried proposal cites none.
      provider.proposes([proposal({ dedupe_key: `retry-after-${outcome}`, source_ids: [] })]);
      const retried = await send();
      expect(retried.status).toBe(200);
      expect(retried.body.action).toBe('provider_generation');
      expect(app.logs.text).not.toContain(PROVIDER_API_KEY);
    } finally {
      await app.close();
    }
  });
});
