import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { resolveLane } from '../domain/lanes.ts';
import { readProjectDetail } from '../store/project-reads.ts';
import type { QueueItemRow } from '../store/queue-items.ts';
import type { AppDeps } from './deps.ts';
import { HttpError } from '../http/errors.ts';
import { queryInt } from '../http/validation.ts';

const ProjectParams = z.strictObject({ project_id: z.string().min(1).max(200) });
const ProjectQuery = z.strictObject({ event_limit: queryInt({ min: 1, max: 200, default: 50 }) });

/** Project detail (interface.md "Project"): the record, its queue row, runs, events and worker observations. */
export async function projectRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const routing = deps.dispatch.routing;
  const laneOf = (item: QueueItemRow): string | null => {
    const lane = resolveLane(item, routing);
    return lane.ok ? lane.target.name : null;
  };

  app.get(
    '/control/api/projects/:project_id',
    { schema: { params: ProjectParams, querystring: ProjectQuery } },
    async (request) => {
      const { project_id } = request.params as z.output<typeof ProjectParams>;
      const { event_limit } = request.query as z.output<typeof ProjectQuery>;
      const detail = await readProjectDetail(deps.store, project_id, { eventLimit: event_limit, resolveLane: laneOf });
      if (!detail) throw new HttpError(404, `unknown project '${project_id}'`);
      return detail;
    },
  );
}
