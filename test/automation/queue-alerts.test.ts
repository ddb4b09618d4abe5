import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AlertSettings } from '../../capabilities/automation/queue-alerts.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { jsonClient } from '../support/ledgers.ts';
import { closedUrl, Receiver } from '../support/receiver.ts';

/**
 * POST /control/api/alerts/queue-check on real Postgres, with real local receivers standing in for the push service
 * and the chat webhook: what is found, the cooldown per finding, the signature, a receiver that is down, and that no
 * secret reaches a log or an answer.
 */

const PUSH_TOKEN = 'push-app-token-DO-NOT-LOG-1';
const PUSH_USER = 'push-user-key-DO-NOT-LOG-2';
const WEBHOOK_SECRET = 'webhook-secret-DO-NOT-LOG-3';
const COOLDOWN_SEC = 2;

let push: Receiver;
let webhook: Receiver;
let t: TestApp;

const settings = (overrides: Partial<AlertSettings> = {}): AlertSettings => ({
  hangAfterSec: 600,
  cooldownSec: COOLDOWN_SEC,
  push: { api_url: push.url, app_token: PUSH_TOKEN, user_key: PUSH_USER, timeout_ms: 2_000 },
  webhook: { url: webhook.url, secret: WEBHOOK_SECRET, timeout_ms: 2_000 },
  ...overrides,
});

async function seedNeedsAPerson(app: TestApp): Promise<void> {
  await app.store.transaction(async (tx) => {
    for (const [projectId, status] of [['alert-error', 'dispatch_error'], ['alert-review', 'needs_review'], ['alert-hung', 'running']] as const) {
      await insertProject(tx, { project_id: projectId, project_name: projectId, project_dir: projectId, workload_class: 'unknown' });
      await insertQueueItem(tx, { project_id: projectId, project_name: projectId, status: status === 'running' ? 'queued' : status });
    }
    // A run whose agent went quiet two hours ago.
    await tx.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by)
       VALUES ('alert-hung-20261122T080000Z', 'alert-hung', 'run:alert-hung-20261122T080000Z', 'running', 'default', 'http://127.0.0.1:9', 'unknown', 'test')`,
    );
    await tx.query(`UPDATE runs SET updated_at = now() - interval '2 hours' WHERE project_id = 'alert-hung'`);
  });
}

beforeAll(async () => {
  [push, webhook] = await Promise.all([Receiver.start(), Receiver.start()]);
  t = await startTestApp({ alerts: settings() });
  await seedNeedsAPerson(t);
});
afterAll(async () => {
  await t.close();
  await Promise.all([push.close(), webhook.close()]);
});

const check = (body: Record<string, unknown> = {}, app = t) => jsonClient(app).post('/control/api/alerts/queue-check', body);
const kinds = (body: Record<string, any>) => (body.findings as { kind: string }[]).map((finding) => finding.kind).sort();

describe('queue-check', () => {
  it('dry run: finds what needs a person, sends nothing and records nothing', async () => {
    const dry = await check();
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect(dry.body).toMatchObject({ dry_run: true, sent: [], would_send: 3, suppressed_by_cooldown: 0, channels: { push: true, webhook: true } });
    expect(kinds(dry.body)).toEqual(['dispatch_error', 'needs_review', 'run_hung']);
    const hung = dry.body.findings.find((finding: { kind: string }) => finding.kind === 'run_hung');
    expect(hung).toMatchObject({ severity: 'critical', entity_type: 'run', entity_id: 'alert-hung-20261122T080000Z' });
    expect(hung.message).toMatch(/has sent no callback for 1\d\d min/);
    expect(push.received).toHaveLength(0);
    expect(webhook.received).toHaveLength(0);
    expect((await t.store.query('SELECT 1 FROM alert_checks')).rowCount).toBe(0);
  });

  it('live: sends each finding once per cooldown to both channels, signed; force_notify sends anyway; after the cooldown it sends again', async () => {
    const live = await check({ dry_run: false });
    expect(live.body).toMatchObject({ dry_run: false, suppressed_by_cooldown: 0, check_id: expect.any(Number) });
    expect(live.body.sent).toEqual([
      { channel: 'push', ok: true, status: 200 },
      { channel: 'webhook', ok: true, status: 200 },
    ]);

    // Push: a form post, Pushover-style.
    const form = new URLSearchParams(push.received[0]!.body);
    expect(push.received[0]!.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(form.get('token')).toBe(PUSH_TOKEN);
    expect(form.get('user')).toBe(PUSH_USER);
    expect(form.get('title')).toMatch(/3 queue finding/);
    expect(form.get('message')!.split('\n')[0]).toMatch(/^\[critical\]/);

    // Webhook: JSON, and a signature the receiver can verify with the shared secret.
    const posted = webhook.received[0]!;
    const expected = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(posted.body).digest('hex')}`;
    expect(posted.headers['x-signature-256']).toBe(expected);
    const payload = JSON.parse(posted.body);
    expect(payload).toMatchObject({ event: 'queue_alert', sent_at: expect.any(String) });
    expect(payload.findings).toHaveLength(3);

    // Within the cooldown: nothing is sent, every finding is counted as held back.
    const again = await check({ dry_run: false });
    expect(again.body).toMatchObject({ sent: [], suppressed_by_cooldown: 3 });
    expect(webhook.received).toHaveLength(1);
    const forced = await check({ dry_run: false, force_notify: true });
    expect(forced.body.sent.map((outcome: { ok: boolean }) => outcome.ok)).toEqual([true, true]);
    expect(webhook.received).toHaveLength(2);

    await new Promise((resolve) => setTimeout(resolve, COOLDOWN_SEC * 1000 + 200));
    const later = await check({ dry_run: false });
    expect(later.body).toMatchObject({ suppressed_by_cooldown: 0 });
    expect(later.body.sent).toHaveLength(2);
    expect(webhook.received).toHaveLength(3);

    // queue-health shows the latest checks, newest first.
    const health = await jsonClient(t).get('/control/api/queue-health');
    expect(health.body.alerts).toMatchObject({ enabled: true, channels: { push: true, webhook: true } });
    expect(health.body.alerts.results[0]).toMatchObject({ check_id: later.body.check_id, trigger: 'api', suppressed_by_cooldown: 0 });
    await expect(t.store.query('DELETE FROM alert_checks')).rejects.toThrow(/append-only/);

    for (const secret of [PUSH_TOKEN, PUSH_USER, WEBHOOK_SECRET]) {
      expect(t.logs.text).not.toContain(secret);
      expect(JSON.stringify([live.body, health.body])).not.toContain(secret);
    }
  });

  it('checks at the same moment, on two replicas, send each finding once between them', async () => {
    const hook = await Receiver.start();
    const first = await startTestApp({ alerts: settings({ push: null, webhook: { url: hook.url, secret: WEBHOOK_SECRET, timeout_ms: 2_000 }, cooldownSec: 1800 }) });
    const second = await startTestApp({ alerts: settings({ push: null, webhook: { url: hook.url, secret: WEBHOOK_SECRET, timeout_ms: 2_000 }, cooldownSec: 1800 }) }, { replicaOf: first });
    try {
      await seedNeedsAPerson(first);
      const answers = await Promise.all([first, second, first, second].map((app) => check({ dry_run: false }, app)));
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
      const sentKinds = hook.received.flatMap((message) => (JSON.parse(message.body) as { findings: { kind: string }[] }).findings.map((finding) => finding.kind));
      expect(sentKinds.sort()).toEqual(kinds(answers[0]!.body));
      expect(answers.reduce((held, answer) => held + answer.body.suppressed_by_cooldown, 0)).toBe(3 * 3);
    } finally {
      await second.close();
      await first.close();
      await hook.close();
    }
  });

  it('a receiver that is down is reported, holds nothing up, and starts no cooldown', async () => {
    const down = await startTestApp({ alerts: settings({ push: null, webhook: { url: await closedUrl(), secret: WEBHOOK_SECRET, timeout_ms: 1_000 } }) });
    try {
      await seedNeedsAPerson(down);
      const started = Date.now();
      const [answer, queue] = await Promise.all([check({ dry_run: false }, down), jsonClient(down).get('/control/api/v1/queue')]);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(answer.body.sent).toEqual([{ channel: 'webhook', ok: false, status: null, error: 'ECONNREFUSED' }]);
      expect(queue.status).toBe(200);
      // Nothing reached anyone: the next check tries again rather than waiting out a cooldown.
      expect((await check({ dry_run: false }, down)).body.suppressed_by_cooldown).toBe(0);
    } finally {
      await down.close();
    }
  });
});
