import { z } from 'zod';
import { doc, optionalHttpUrl, text } from './field-kinds.ts';

/** The automation room's fields: the queue alerts and their channels (push, chat webhook), the queue pump. */
export const automationFields = {
  push_alerts_enabled: doc(z.boolean().default(false), {
    description: 'Send queue alerts to a Pushover-style push service; requires push_app_token, push_user_key and push_api_url.',
  }),
  push_app_token: doc(text().optional(), { description: 'Push service application token (sent as the form field `token`).', secret: true }),
  push_user_key: doc(text().optional(), { description: 'Push service user key (sent as the form field `user`).', secret: true }),
  push_api_url: doc(optionalHttpUrl(), { description: 'Push service API URL, e.g. its messages endpoint.' }),
  queue_alert_cooldown_sec: doc(z.number().min(0).default(1800), {
    description: 'A finding is sent at most once per this many seconds (force_notify on a check sends it anyway).',
  }),
  queue_alert_hang_after_sec: doc(z.number().min(0).default(3600), {
    description: 'A run waiting on its agent with no callback for this long is reported as hung.',
  }),
  queue_alert_check_interval_sec: doc(z.number().int().min(1).max(86400).default(300), {
    description: 'Seconds between scheduled queue checks (the schedule is paused while no alert channel is enabled).',
  }),
  chat_alert_webhook_enabled: doc(z.boolean().default(false), {
    description: 'Post queue alerts to a chat webhook; requires chat_alert_webhook_url.',
  }),
  chat_alert_webhook_url: doc(optionalHttpUrl(), {
    description: 'Chat webhook URL (secret: chat services carry their token in the path).',
    secret: true,
  }),
  chat_alert_webhook_secret: doc(text().optional(), {
    description: 'Signs each webhook post: header X-Signature-256 is sha256=<hex HMAC-SHA256 of the raw body>; unset sends no signature.',
    secret: true,
  }),
  chat_alert_webhook_timeout_sec: doc(z.number().positive().default(10), {
    description: 'Time limit of one alert post (webhook and push).',
  }),
  queue_pump_enabled: doc(z.boolean().default(false), {
    description: 'Advance the queue on a Temporal Schedule: each tick dispatches the next eligible item live when that is safe (the schedule exists either way, paused while this is false).',
  }),
  queue_pump_interval_sec: doc(z.number().int().min(1).max(86400).default(60), { description: 'Seconds between queue pump ticks.' }),
  queue_pump_followup_launch_enabled: doc(z.boolean().default(false), {
    description: 'Let each queue pump tick launch the next follow-up of a negative or inconclusive run.',
  }),
  queue_pump_paper_draft_enabled: doc(z.boolean().default(false), {
    description: 'Let each queue pump tick draft the next paper (draft-next).',
  }),
};
