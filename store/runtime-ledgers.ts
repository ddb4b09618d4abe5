import type { QueueStatus } from '../domain/queue-status.ts';
import type { WorkloadClass } from '../domain/workload.ts';
import type { Queryable } from './store.ts';

/**
 * Runtime ledgers that Research Facility promotion writes into: ideas, projects and queue items (one queue row per
 * project). Every function takes a Queryable so it runs inside the caller's transaction.
 */

type RawRow = Record<string, unknown>;
const iso = (value: unknown): string => new Date(value as Date | string).toISOString();

// ---------------------------------------------------------------------------------------------------------------
// Ideas

export interface IdeaInsert {
  idea_id: string;
  candidate_id?: string | null;
  title: string;
  hypothesis?: string | null;
}

export interface IdeaRow {
  idea_id: string;
  candidate_id: string | null;
  title: string;
  hypothesis: string | null;
  created_at: string;
}

const IDEA_COLUMNS = 'idea_id, candidate_id, title, hypothesis, created_at';
const toIdea = (row: RawRow): IdeaRow => ({ ...(row as unknown as IdeaRow), created_at: iso(row.created_at) });

/** Inserts an idea; a second idea for the same candidate fails (unique_violation, 23505). */
export async function insertIdea(tx: Queryable, idea: IdeaInsert): Promise<IdeaRow> {
  const result = await tx.query<RawRow>(
    `INSERT INTO ideas (idea_id, candidate_id, title, hypothesis) VALUES ($1, $2, $3, $4) RETURNING ${IDEA_COLUMNS}`,
    [idea.idea_id, idea.candidate_id ?? null, idea.title, idea.hypothesis ?? null],
  );
  return toIdea(result.rows[0]!);
}

export async function getIdea(q: Queryable, ideaId: string): Promise<IdeaRow | undefined> {
  const result = await q.query<RawRow>(`SELECT ${IDEA_COLUMNS} FROM ideas WHERE idea_id = $1`, [ideaId]);
  return result.rows[0] ? toIdea(result.rows[0]) : undefined;
}

/** The idea a candidate was promoted into, if any (at most one per candidate). */
export async function getIdeaByCandidate(q: Queryable, candidateId: string): Promise<IdeaRow | undefined> {
  const result = await q.query<RawRow>(`SELECT ${IDEA_COLUMNS} FROM ideas WHERE candidate_id = $1`, [candidateId]);
  return result.rows[0] ? toIdea(result.rows[0]) : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Projects

/** The project_id CHECK of the projects table. */
export const PROJECT_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,127}$/;

export interface ProjectInsert {
  /** A safe slug: PROJECT_ID_PATTERN. */
  project_id: string;
  project_name: string;
  /** Relative to project_root; the database refuses absolute paths and ".." segments. */
  project_dir: string;
  idea_id?: string | null;
  candidate_id?: string | null;
  /** Defaults to "unknown". */
  workload_class?: WorkloadClass;
  machine_target?: string | null;
}

export interface ProjectRow {
  project_id: string;
  project_name: string;
  project_dir: string;
  idea_id: string | null;
  candidate_id: string | null;
  workload_class: WorkloadClass;
  machine_target: string | null;
  created_at: string;
  updated_at: string;
}

const PROJECT_COLUMNS =
  'project_id, project_name, project_dir, idea_id, candidate_id, workload_class, machine_target, created_at, updated_at';
const toProject = (row: RawRow): ProjectRow => ({
  ...(row as unknown as ProjectRow),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export async function insertProject(tx: Queryable, project: ProjectInsert): Promise<ProjectRow> {
  const result = await tx.query<RawRow>(
    `INSERT INTO projects (project_id, project_name, project_dir, idea_id, candidate_id, workload_class, machine_target)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${PROJECT_COLUMNS}`,
    [
      project.project_id,
      project.project_name,
      project.project_dir,
      project.idea_id ?? null,
      project.candidate_id ?? null,
      project.workload_class ?? 'unknown',
      project.machine_target ?? null,
    ],
  );
  return toProject(result.rows[0]!);
}

export async function getProject(q: Queryable, projectId: string): Promise<ProjectRow | undefined> {
  const result = await q.query<RawRow>(`SELECT ${PROJECT_COLUMNS} FROM projects WHERE project_id = $1`, [projectId]);
  return result.rows[0] ? toProject(result.rows[0]) : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Queue items

export interface QueueItemInsert {
  project_id: string;
  project_name: string;
  /** Defaults to "queued". */
  status?: QueueStatus;
  manual_review_required?: boolean;
  /** Lower goes first; default 50. */
  dispatch_priority?: number;
  /** Default 50. */
  selection_rank?: number;
  machine_target?: string | null;
  /** Defaults to "unknown". */
  workload_class?: WorkloadClass;
  next_action_hint?: string | null;
  candidate_id?: string | null;
  /** Required by the database for an in-flight status: the worker target the item runs on. */
  lane?: string | null;
}

export interface QueueItemRow {
  project_id: string;
  project_name: string;
  status: QueueStatus;
  manual_review_required: boolean;
  dispatch_priority: number;
  selection_rank: number;
  machine_target: string | null;
  workload_class: WorkloadClass;
  current_run_id: string | null;
  last_run_state: string | null;
  next_action_hint: string | null;
  last_error: string | null;
  candidate_id: string | null;
  /** The worker target the item was last claimed on. */
  lane: string | null;
  /** Failed dispatch attempts in a row; the third moves the item to dispatch_error. */
  dispatch_failures: number;
  created_at: string;
  updated_at: string;
}

export const QUEUE_ITEM_COLUMNS =
  'project_id, project_name, status, manual_review_required, dispatch_priority, selection_rank, machine_target, ' +
  'workload_class, current_run_id, last_run_state, next_action_hint, last_error, candidate_id, lane, dispatch_failures, ' +
  'created_at, updated_at';

export const toQueueItem = (row: RawRow): QueueItemRow => ({
  ...(row as unknown as QueueItemRow),
  dispatch_priority: Number(row.dispatch_priority),
  selection_rank: Number(row.selection_rank),
  dispatch_failures: Number(row.dispatch_failures),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

/**
 * Inserts the queue row of a project. There is one queue row per project: a second insert for the same project fails
 * (unique_violation, 23505), so callers that must be idempotent read the row first (getQueueItem with forUpdate).
 */
export async function insertQueueItem(tx: Queryable, item: QueueItemInsert): Promise<QueueItemRow> {
  const result = await tx.query<RawRow>(
    `INSERT INTO queue_items (project_id, project_name, status, manual_review_required, dispatch_priority,
       selection_rank, machine_target, workload_class, next_action_hint, candidate_id, lane)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ${QUEUE_ITEM_COLUMNS}`,
    [
      item.project_id,
      item.project_name,
      item.status ?? 'queued',
      item.manual_review_required ?? false,
      item.dispatch_priority ?? 50,
      item.selection_rank ?? 50,
      item.machine_target ?? null,
      item.workload_class ?? 'unknown',
      item.next_action_hint ?? null,
      item.candidate_id ?? null,
      item.lane ?? null,
    ],
  );
  return toQueueItem(result.rows[0]!);
}

/** The queue row of a project; `forUpdate` locks it until the caller's transaction ends. */
export async function getQueueItem(
  q: Queryable,
  projectId: string,
  options: { forUpdate?: boolean } = {},
): Promise<QueueItemRow | undefined> {
  const result = await q.query<RawRow>(
    `SELECT ${QUEUE_ITEM_COLUMNS} FROM queue_items WHERE project_id = $1${options.forUpdate ? ' FOR UPDATE' : ''}`,
    [projectId],
  );
  return result.rows[0] ? toQueueItem(result.rows[0]) : undefined;
}
