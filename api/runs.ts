import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { queryInt } from '../http/validation.ts';
import { cancelRun, runDetail } from '../services/runs.ts';
import type { AppDeps } from './deps.ts';

const RunParams = z.strictObject({ run_id: z.string().min(1).max(200) });
const CancelBody = z
  .strictObject({
    requested_by: z.string().trim().min(1).max(200).default('operator'),
    reason: z.string().trim().min(1).max(2000).optional(),
  })
  .default({ requested_by: 'operator' });

const RunDetailQuery = z.strictObject({ event_limit: queryInt({ min: 1, max: 200, default: 50 }) });

export async function runRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const runs = { store: deps.store, runs: deps.runs };

  app.get('/control/api/v1/runs/:run_id', { schema: { params: RunParams, querystring: RunDetailQuery } }, async (request) => {
    const { run_id: runId } = request.params as z.output<typeof RunParams>;
    return runDetail(runs, runId, (request.query as z.output<typeof RunDetailQuery>).event_limit);
  });

  /** 202 while the workflow has not yet recorded the cancellation. */
  app.post('/control/api/runs/:run_id/cancel', { schema: { params: RunParams, body: CancelBody } }, async (request, reply) => {
    const { run_id: runId } = request.params as z.output<typeof RunParams>;
    const body = request.body as z.output<typeof CancelBody>;
    const result = await cancelRun(runs, { run_id: runId, ...body, request_id: request.id });
    if ('pending' in result) {
      const { pending: _pending, ...answer } = result;
      return reply.code(202).send(answer);
    }
    return result;
  });
}
