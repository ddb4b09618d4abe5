import type { QueueStatus } from '../runs/domain/queue-status.ts';
import { AUDIT_EVENT_COLUMNS, type AuditEvent } from '../../platform/store/audit-events.ts';
import { getProject, type ProjectRow } from '../runs/projects.ts';
import { getQueueItem, type QueueItemRow } from '../runs/queue-items.ts';
import { lineageOf, type LineageRow } from '../research/research-lineage.ts';
import { listPapersOf, type PaperRow } from '../papers/paper-ledger.ts';
import { ascending, descending, selectKeysetPage, type KeysetOrder, type KeysetPage } from '../../platform/store/keyset.ts';
import { isoTimestampSql } from '../../platform/store/row-parsers.ts';
import { containsPattern, sqlParams } from '../../platform/store/sql-params.ts';
import { RUN_COLUMNS, type RunRow } from '../runs/run-ledger.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { listWorkerObservations, type WorkerObservation } from '../runs/worker-observations.ts';

/**
 * The project detail read model (`GET /control/api/projects/{project_id}`): everything recorded about one project,
 * assembled from the runtime ledgers, runs, audit events, worker observations and lineage.
 */

/** How many cached worker observations the detail shows. */
export const PROJECT_OBSERVATION_LIMIT = 20;

// ---------------------------------------------------------------------------------------------------------------
// Runs

export interface AppliedTransition {
  transition: string;
  from_state: string | null;
  to_state: string;
  queue_status: QueueStatus | null;
  created_at: string;
}

/** Every column of `runs`, plus the transitions applied to the run in the order they were applied. */
export interface ProjectRun extends RunRow {
  transitions: AppliedTransition[];
}

/** Most runs a project detail lists, newest first. */
export const PROJECT_RUN_LIMIT = 100;

async function runsWithTransitions(q: Queryable, by: 'project_id' | 'run_id', id: string, limit: number): Promise<ProjectRun[]> {
  const result = await q.query<ProjectRun>(
    `SELECT ${RUN_COLUMNS}, coalesce(applied.transitions, '[]'::json) AS transitions
       FROM runs r
       LEFT JOIN LATERAL (
         SELECT json_agg(json_build_object(
                  'transition', t.transition, 'from_state', t.from_state, 'to_state', t.to_state,
                  'queue_status', t.queue_status, 'created_at', ${isoTimestampSql('t.created_at')})
                ORDER BY t.created_at, t.transition) AS transitions
           FROM run_transitions t
          WHERE t.run_id = r.run_id
       ) AS applied ON true
      WHERE r.${by} = $1
      ORDER BY r.created_at DESC, r.run_id DESC
      LIMIT $2`,
    [id, limit],
  );
  return result.rows;
}

/** A project's newest runs (at most PROJECT_RUN_LIMIT), each with its applied transitions (one round trip). */
export const listProjectRuns = (q: Queryable, projectId: string): Promise<ProjectRun[]> =>
  runsWithTransitions(q, 'project_id', projectId, PROJECT_RUN_LIMIT);

/** One run with its applied transitions. */
export async function getRunWithTransitions(q: Queryable, runId: string): Promise<ProjectRun | undefined> {
  return (await runsWithTransitions(q, 'run_id', runId, 1))[0];
}

// ---------------------------------------------------------------------------------------------------------------
// Events

/** The newest `limit` audit events about any of `entityIds`, newest first (served by audit_events_entity_id). */
export async function listEventsForEntities(
  q: Queryable,
  entityIds: readonly string[],
  limit: number,
): Promise<AuditEvent[]> {
  if (entityIds.length === 0) return [];
  const result = await q.query<AuditEvent>(
    `SELECT ${AUDIT_EVENT_COLUMNS} FROM audit_events WHERE entity_id = ANY($1::text[]) ORDER BY id DESC LIMIT $2`,
    [entityIds, limit],
  );
  return result.rows;
}

// ---------------------------------------------------------------------------------------------------------------
// The whole detail

export interface ProjectDetail {
  project: ProjectRow | null;
  queue_item: QueueItemRow | null;
  runs: ProjectRun[];
  /** Newest first, at most DETAIL_PAPER_LIMIT. */
  papers: PaperRow[];
  events: AuditEvent[];
  worker_observations: WorkerObservation[];
  lineage: LineageRow[];
}

export interface ProjectDetailOptions {
  eventLimit: number;
  /** The lane of a queue item never claimed (its lane column is NULL), from the configured routing; null if none. */
  resolveLane?: (item: QueueItemRow) => string | null;
}

/** Everything about one project, or undefined when neither a project record nor a queue item exists. */
export async function readProjectDetail(
  q: Queryable,
  projectId: string,
  options: ProjectDetailOptions,
): Promise<ProjectDetail | undefined> {
  const [project, queueItem, runs, papers] = await Promise.all([
    getProject(q, projectId),
    getQueueItem(q, projectId),
    listProjectRuns(q, projectId),
    listPapersOf(q, { project_id: projectId }),
  ]);
  if (!project && !queueItem) return undefined;

  const runIds = runs.map((run) => run.run_id);
  const lane = queueItem ? (queueItem.lane ?? options.resolveLane?.(queueItem) ?? null) : null;
  const [events, observations, lineage] = await Promise.all([
    listEventsForEntities(q, [projectId, ...runIds], options.eventLimit),
    listWorkerObservations(q, { runIds, targets: lane ? [lane] : [] }, PROJECT_OBSERVATION_LIMIT),
    lineageOf(q, 'project', projectId),
  ]);
  return {
    project: project ?? null,
    queue_item: queueItem ?? null,
    runs,
    papers,
    events,
    worker_observations: observations,
    lineage,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The project list (`GET /control/api/v1/projects`)

export interface ProjectListRow extends ProjectRow {
  /** The project's queue item's status; null when it has none. */
  queue_status: QueueStatus | null;
  current_run_id: string | null;
}

export const PROJECT_ORDERS: readonly KeysetOrder[] = [
  { name: '-created_at', columns: [descending('created_at', 'timestamptz'), descending('project_id', 'text')] },
  { name: 'created_at', columns: [ascending('created_at', 'timestamptz'), ascending('project_id', 'text')] },
  { name: 'project_id', columns: [ascending('project_id', 'text')] },
];

const PROJECT_SEARCHED_COLUMNS = ['p.project_id', 'p.project_name', 'p.project_dir'];

export async function walkProjects(
  q: Queryable,
  query: { search?: string | undefined; order: KeysetOrder; after: string[] | null; limit: number },
): Promise<KeysetPage<ProjectListRow>> {
  const sql = sqlParams();
  const where: string[] = [];
  if (query.search) {
    const pattern = sql.bind(containsPattern(query.search));
    where.push(`(${PROJECT_SEARCHED_COLUMNS.map((column) => `${column} ILIKE ${pattern}`).join(' OR ')})`);
  }
  return selectKeysetPage<ProjectListRow>(q, {
    select: `p.project_id, p.project_name, p.project_dir, p.idea_id, p.candidate_id, p.workload_class, p.machine_target,
             p.created_at, p.updated_at, qi.status AS queue_status, qi.current_run_id`,
    from: 'FROM projects p LEFT JOIN queue_items qi ON qi.project_id = p.project_id',
    table: 'p',
    where,
    sql,
    order: query.order,
    after: query.after,
    limit: query.limit,
  });
}
