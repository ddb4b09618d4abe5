import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { resolveLane } from '../../capabilities/runs/domain/worker-lanes.ts';
import { readProjectDetail } from '../../capabilities/console/project-reads.ts';
import type { QueueItemRow } from '../../capabilities/runs/queue-items.ts';
import type { AppDeps } from '../deps.ts';
import { HttpError } from '../../platform/http/errors.ts';
import { errorResponses } from '../../platform/http/responses.ts';
import { queryInt } from '../../platform/http/validation.ts';
import { ProjectDetailAnswer } from './console-answers.ts';

const ProjectParams = z.strictObject({ project_id: z.string().min(1).max(200) });
const ProjectQuery = z.strictObject({ event_limit: queryInt({ min: 1, max: 200, default: 50 }) });


/** Project detail: the record, its queue row, runs, events and worker observations. */
export async function projectRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dispatch'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const routing = deps.dispatch.routing;
  const laneOf = (item: QueueItemRow): string | null => {
    const lane = resolveLane(item, routing);
    return lane.ok ? lane.target.name : null;
  };

  app.get(
    '/control/api/projects/:project_id',
    {
      config: { auth: 'control' },
      schema: {
        tags: ['queues'],
        summary: 'A project with its queue item, runs and their transitions, recent events, worker observations and lineage',
        params: ProjectParams,
        querystring: ProjectQuery,
        response: { 200: ProjectDetailAnswer, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      const { project_id } = request.params;
      const { event_limit } = request.query;
      const detail = await readProjectDetail(deps.store, project_id, { eventLimit: event_limit, resolveLane: laneOf });
      if (!detail) throw new HttpError(404, `unknown project '${project_id}'`);
      return detail;
    },
  );
}
