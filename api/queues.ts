import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { QUEUE_GROUPS, QUEUE_STATUSES } from '../domain/queue-status.ts';
import { listQueueItems, QUEUE_SORT_COLUMNS } from '../store/queue-reads.ts';
import type { AppDeps } from './deps.ts';
import { pageOf, queryInt, queryOptional, queryText } from '../http/validation.ts';

const QueueParams = z.strictObject({ queue: z.enum(QUEUE_GROUPS) });

const sortColumns = new Set(QUEUE_SORT_COLUMNS);
const QueueQuery = z.strictObject({
  page: queryInt({ min: 1, default: 1 }),
  page_size: queryInt({ min: 1, max: 500, default: 50 }),
  search: queryText(),
  status: queryOptional(z.enum(QUEUE_STATUSES)),
  sort: queryOptional(
    z.string().refine((v) => sortColumns.has(v.replace(/^-/, '')), `must be one of ${QUEUE_SORT_COLUMNS.join(', ')}, optionally prefixed with "-"`),
  ),
});

/** Queue reads (interface.md "Queue operations", decisions §3): one logical group, paged, filtered and sorted. */
export async function queueRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get('/control/api/queues/:queue', { schema: { params: QueueParams, querystring: QueueQuery } }, async (request) => {
    const { queue } = request.params as z.output<typeof QueueParams>;
    const query = request.query as z.output<typeof QueueQuery>;
    const { items, total } = await listQueueItems(deps.store, { group: queue, ...query });
    return pageOf(items, total, query);
  });
}
