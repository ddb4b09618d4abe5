import { createHmac } from 'node:crypto';
import type { Finding } from './domain/alert-findings.ts';
import { failureCode, httpUrlOf, readCapped } from '../../platform/http/outbound-http.ts';

/**
 * The receivers of queue alerts (docs/automation.md#queue-alerts): a Pushover-style push service (form POST with its app token
 * and user key) and a chat webhook (JSON signed with HMAC-SHA256). A send never throws and never takes longer than
 * its timeout: a receiver that is down is reported, and holds nothing up. Tokens, keys and secrets go only into the
 * request; the outcome carries the HTTP status and a failure code, never a body or a message that could quote them.
 */

export interface SendOutcome {
  channel: 'push' | 'webhook';
  ok: boolean;
  status: number | null;
  error?: string;
}

export interface PushSettings {
  api_url: string;
  app_token: string;
  user_key: string;
  timeout_ms: number;
}

export interface WebhookSettings {
  url: string;
  /** '' sends no signature header. */
  secret: string;
  timeout_ms: number;
}

const MAX_REPLY_BYTES = 64 * 1024;
const MAX_PUSH_MESSAGE = 1024;

async function post(channel: SendOutcome['channel'], url: string, init: { headers: Record<string, string>; body: string }, timeoutMs: number): Promise<SendOutcome> {
  const target = httpUrlOf(url);
  if (!target) return { channel, ok: false, status: null, error: 'not an http(s) URL' };
  try {
    const response = await fetch(target, { method: 'POST', ...init, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    await readCapped(response, MAX_REPLY_BYTES).catch(() => null);
    return { channel, ok: response.ok, status: response.status };
  } catch (error) {
    const code = (error as Error).name === 'TimeoutError' ? 'timeout' : failureCode(error);
    return { channel, ok: false, status: null, error: code };
  }
}

/** The push text: a title, and one line per finding, most severe first, cut to the service's usual limit. */
export function pushText(findings: readonly Finding[]): { title: string; message: string } {
  const order = { critical: 0, warning: 1, info: 2 } as const;
  const lines = [...findings].sort((a, b) => order[a.severity] - order[b.severity]).map((finding) => `[${finding.severity}] ${finding.message}`);
  const message = lines.join('\n');
  return {
    title: `research-control-plane: ${findings.length} queue finding(s) need a person`,
    message: message.length > MAX_PUSH_MESSAGE ? `${message.slice(0, MAX_PUSH_MESSAGE - 1)}…` : message,
  };
}

export function sendPush(settings: PushSettings, findings: readonly Finding[]): Promise<SendOutcome> {
  const { title, message } = pushText(findings);
  const body = new URLSearchParams({ token: settings.app_token, user: settings.user_key, title, message }).toString();
  return post('push', settings.api_url, { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body }, settings.timeout_ms);
}

/** `sha256=<hex>` of the raw body, keyed with the secret: what the receiver recomputes to trust the post. */
export const webhookSignature = (secret: string, rawBody: string): string => `sha256=${createHmac('sha256', secret).update(rawBody).digest('hex')}`;

export function sendWebhook(settings: WebhookSettings, findings: readonly Finding[], sentAt: string): Promise<SendOutcome> {
  const body = JSON.stringify({ event: 'queue_alert', findings, sent_at: sentAt });
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (settings.secret) headers['x-signature-256'] = webhookSignature(settings.secret, body);
  return post('webhook', settings.url, { headers, body }, settings.timeout_ms);
}
