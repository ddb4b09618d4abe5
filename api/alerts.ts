import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { FINDING_KINDS } from '../domain/queue-alerts.ts';
import { errorResponses, openObject } from '../http/responses.ts';
import { runQueueCheck } from '../services/queue-alerts.ts';
import type { AppDeps } from './deps.ts';

/** Queue alerts (README "Queue alerts"): run the queue check now. */

const QueueCheckBody = z.strictObject({
  dry_run: z.boolean().default(true),
  force_notify: z.boolean().default(false).describe('Send every finding now, cooldown or not'),
});

const FindingSchema = openObject({
  kind: z.enum(FINDING_KINDS),
  severity: z.enum(['critical', 'warning', 'info']),
  entity_type: z.string(),
  entity_id: z.string(),
  message: z.string(),
  first_seen_at: z.string(),
});

const QueueCheckAnswer = openObject({
  dry_run: z.boolean(),
  findings: z.array(FindingSchema),
  sent: z.array(openObject({ channel: z.enum(['push', 'webhook']), ok: z.boolean(), status: z.number().int().nullable() })),
  suppressed_by_cooldown: z.number().int(),
  channels: openObject({ push: z.boolean(), webhook: z.boolean() }),
  checked_at: z.string(),
  would_send: z.number().int().optional().describe('Dry run: how many findings a live check would send'),
  check_id: z.number().int().optional().describe('Live: the check in the alerts ledger'),
});

export async function alertRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const schema = {
    tags: ['status'],
    summary: 'Find what needs a person and send it to the alert channels, at most once per cooldown per finding (dry_run defaults to true)',
    body: QueueCheckBody,
    response: { 200: QueueCheckAnswer, ...errorResponses(401, 403, 422, 501) },
  };
  app.post('/control/api/alerts/queue-check', { config: { auth: 'control' }, schema }, async (request) =>
    runQueueCheck({ store: deps.store, dispatch: deps.dispatch, alerts: deps.alerts }, { ...request.body, trigger: 'api' }),
  );
}
