import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AlertFindingSchema } from './alert-answers.ts';
import { errorResponses } from '../../platform/http/responses.ts';
import { runQueueCheck } from '../../capabilities/automation/queue-alerts.ts';
import type { AppDeps } from '../deps.ts';

/** Queue alerts (docs/automation.md#queue-alerts): run the queue check now. */

const QueueCheckBody = z.strictObject({
  dry_run: z.boolean().default(true),
  force_notify: z.boolean().default(false).describe('Send every finding now, cooldown or not'),
});

const QueueCheckAnswer = z.object({
  dry_run: z.boolean(),
  findings: z.array(AlertFindingSchema),
  sent: z.array(z.object({ channel: z.enum(['push', 'webhook']), ok: z.boolean(), status: z.number().int().nullable(), error: z.string().optional().describe('Why the channel did not take it') })),
  suppressed_by_cooldown: z.number().int(),
  channels: z.object({ push: z.boolean(), webhook: z.boolean() }),
  checked_at: z.string(),
  would_send: z.number().int().optional().describe('Dry run: how many findings a live check would send'),
  check_id: z.number().int().optional().describe('Live: the check in the alerts ledger'),
});

export async function alertRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dispatch' | 'alerts'>): Promise<void> {
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
