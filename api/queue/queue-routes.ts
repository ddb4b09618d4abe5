import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { QUEUE_GROUPS, QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';
import { listQueueItems, QUEUE_SORT_COLUMNS } from '../../capabilities/queue/queue-reads.ts';
import type { AppDeps } from '../deps.ts';
import { errorResponses, pageBody } from '../../platform/http/responses.ts';
import { pageOf, queryInt, queryOptional, querySort, queryText } from '../../platform/http/validation.ts';
import { QueueItemSchema } from '../runs/run-answers.ts';

const QueueParams = z.strictObject({ queue: z.enum(QUEUE_GROUPS) });

const QueueQuery = z.strictObject({
  page: queryInt({ min: 1, default: 1 }),
  page_size: queryInt({ min: 1, max: 500, default: 50 }),
  search: queryText(),
  status: queryOptional(z.enum(QUEUE_STATUSES)),
  sort: queryOptional(querySort(QUEUE_SORT_COLUMNS)),
});

/** Queue reads: one logical group, paged, filtered and sorted. */
export async function queueRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const schema = {
    tags: ['queues'],
    summary: 'One logical queue group, paged, filtered and sorted (default: the dispatch order)',
    params: QueueParams,
    querystring: QueueQuery,
    response: { 200: pageBody(QueueItemSchema), ...errorResponses(401, 422) },
  };
  app.get('/control/api/queues/:queue', { config: { auth: 'control' }, schema }, async (request) => {
    const { queue } = request.params;
    const query = request.query;
    const { items, total } = await listQueueItems(deps.store, { group: queue, ...query });
    return pageOf(items, total, query);
  });
}
