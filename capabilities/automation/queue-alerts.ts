import { randomUUID } from 'node:crypto';
import { sendPush, sendWebhook, type PushSettings, type SendOutcome, type WebhookSettings } from './alert-channels.ts';
import type { Config } from '../../platform/config/schema.ts';
import { workerFreshness } from '../runs/domain/dispatch-safety.ts';
import { alertFindings, dueFindings, findingKey, type Finding } from './domain/alert-findings.ts';
import { claimAlertSends, lastNotified, queueAlertFacts, recordAlertCheck, releaseAlertSends } from './alert-ledger.ts';
import type { Store } from '../../platform/store/store.ts';
import { latestWorkerObservations } from '../runs/worker-observations.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import type { DispatchSettings } from '../runs/dispatch-settings.ts';

/**
 * The queue check (docs/automation.md#queue-alerts): what needs a person, sent to the configured channels at most once per
 * cooldown per finding, and recorded. `POST /control/api/alerts/queue-check` and the alert schedule both run it.
 */

export interface AlertSettings {
  hangAfterSec: number;
  cooldownSec: number;
  push: PushSettings | null;
  webhook: WebhookSettings | null;
}

/** A push service gets as long as a webhook may take. */
export function alertSettingsFrom(config: Config): AlertSettings {
  const timeoutMs = config.chat_alert_webhook_timeout_sec * 1000;
  return {
    hangAfterSec: config.queue_alert_hang_after_sec,
    cooldownSec: config.queue_alert_cooldown_sec,
    push:
      config.push_alerts_enabled && config.push_api_url && config.push_app_token && config.push_user_key
        ? { api_url: config.push_api_url, app_token: config.push_app_token, user_key: config.push_user_key, timeout_ms: timeoutMs }
        : null,
    webhook:
      config.chat_alert_webhook_enabled && config.chat_alert_webhook_url
        ? { url: config.chat_alert_webhook_url, secret: config.chat_alert_webhook_secret ?? '', timeout_ms: timeoutMs }
        : null,
  };
}

export interface QueueCheckRequest {
  dry_run: boolean;
  force_notify: boolean;
  trigger: 'api' | 'schedule';
}

export interface QueueCheckDeps {
  store: Store;
  dispatch: DispatchSettings;
  alerts: AlertSettings;
}

/**
 * What needs a person now, read from the ledgers: the queue check's findings, which `GET /metrics` also counts by
 * kind at each scrape (rcp_queue_alert_findings). Workers are judged by their latest stored preflight, as the
 * status snapshot judges them; one that was never observed is not a finding.
 */
export async function queueFindings(deps: QueueCheckDeps, now: Date): Promise<Finding[]> {
  const [facts, observations] = await Promise.all([queueAlertFacts(deps.store), latestWorkerObservations(deps.store)]);
  const workers = workerFreshness([...deps.dispatch.routing.targets.values()], observations, now)
    .filter((entry) => entry.observed_at !== null)
    .map((entry) => ({ name: entry.target, observed_at: entry.observed_at!, ok: entry.ok !== false, stale: entry.stale }));
  return alertFindings({ ...facts, workers }, { hangAfterSec: deps.alerts.hangAfterSec, now });
}

export async function runQueueCheck(deps: QueueCheckDeps, request: QueueCheckRequest) {
  const { store, alerts } = deps;
  const now = new Date();
  const findings = await queueFindings(deps, now);
  const { due, suppressed } = dueFindings(findings, await lastNotified(store, findings.map(findingKey)), {
    cooldownSec: alerts.cooldownSec,
    now,
    force: request.force_notify,
  });
  const channels = { push: alerts.push !== null, webhook: alerts.webhook !== null };
  const base = { dry_run: request.dry_run, findings, suppressed_by_cooldown: suppressed, channels, checked_at: now.toISOString() };
  if (request.dry_run) return { ...base, sent: [] as SendOutcome[], would_send: channels.push || channels.webhook ? due.length : 0 };

  // A check that cannot record itself would start no cooldown and send the same findings on every run.
  if (store.readOnly) throw new CommandRefusedError(501, 'the store is read-only (control_plane_store_backend is pg_readonly): a live check could not record its sends');
  // Checks running at the same moment (two replicas, the schedule and an operator) each send only the findings they
  // claimed: one of them sends a finding, the others count it as held back.
  const holder = randomUUID();
  const claimed = await claimAlertSends(store, due.map(findingKey), holder, request.force_notify ? 0 : alerts.cooldownSec);
  const sending = due.filter((finding) => claimed.has(findingKey(finding)));
  const heldBack = suppressed + due.length - sending.length;
  const sends: Promise<SendOutcome>[] = [];
  if (sending.length > 0 && alerts.push) sends.push(sendPush(alerts.push, sending));
  if (sending.length > 0 && alerts.webhook) sends.push(sendWebhook(alerts.webhook, sending, now.toISOString()));
  const sent = await Promise.all(sends);
  // A finding's cooldown starts once any channel took it; a check whose every channel failed tries again next time.
  const notified = sent.some((outcome) => outcome.ok) ? sending.map(findingKey) : [];
  if (notified.length === 0) await releaseAlertSends(store, sending.map(findingKey), holder);
  const checkId = await store.transaction((tx) =>
    recordAlertCheck(tx, { trigger: request.trigger, force_notify: request.force_notify, findings, sent, suppressed_by_cooldown: heldBack, notified }),
  );
  return { ...base, suppressed_by_cooldown: heldBack, sent, check_id: checkId };
}
