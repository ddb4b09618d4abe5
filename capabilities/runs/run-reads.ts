import type { AgentQuestion } from '../../worker-gate/contract/agent-question.ts';
import { FINISHED_RUN_STATES, type RunState } from './domain/run-state.ts';
import type { PaperStatus } from '../papers/domain/paper-status.ts';
import { ascending, descending, selectKeysetPage, type KeysetOrder, type KeysetPage } from '../../platform/store/keyset.ts';
import { containsPattern, sqlParams } from '../../platform/store/sql-params.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { RUN_CAUSE_SQL, RUN_TOKEN_USAGE_SQL } from './store/callback-ledger.ts';
import type { TokenUsage } from '../../worker-gate/contract/agent-runtimes.ts';
import type { RunCause } from '../../worker-gate/contract/run-cause.ts';
import type { UsageLimitWait } from '../../worker-gate/contract/usage-limit.ts';

/** The run list (`GET /control/api/v1/runs`): a run's summary, without the gate's large JSON answers. */

export interface RunListRow {
  run_id: string;
  project_id: string;
  workflow_id: string;
  state: RunState;
  lane: string;
  workload_class: string;
  requested_by: string;
  session_id: string | null;
  question: string | null;
  question_detail: AgentQuestion | null;
  usage_limit: UsageLimitWait | null;
  decision: string | null;
  decision_summary: string | null;
  last_error: string | null;
  /** The status of the run's paper; null when it has none. */
  paper_status: PaperStatus | null;
  /** The agent's token usage as the worker last reported it; null when it reported none. */
  token_usage: TokenUsage | null;
  /** Why the run ended, as the worker last reported it; null when it reported none. */
  cause: RunCause | null;
  finished_at: string | null;
  gpu_indices: number[] | null;
  cpu_count: number | null;
  created_at: string;
  updated_at: string;
}

const RUN_LIST_COLUMNS =
  'run_id, project_id, workflow_id, state, lane, workload_class, requested_by, session_id, question, question_detail, usage_limit, decision, ' +
  `decision_summary, last_error, paper_status, ${RUN_TOKEN_USAGE_SQL}, ${RUN_CAUSE_SQL}, finished_at, gpu_indices, cpu_count, created_at, updated_at`;

export const RUN_ORDERS: readonly KeysetOrder[] = [
  { name: '-created_at', columns: [descending('created_at', 'timestamptz'), descending('run_id', 'text')] },
  { name: 'created_at', columns: [ascending('created_at', 'timestamptz'), ascending('run_id', 'text')] },
  { name: '-updated_at', columns: [descending('updated_at', 'timestamptz'), descending('run_id', 'text')] },
  { name: 'updated_at', columns: [ascending('updated_at', 'timestamptz'), ascending('run_id', 'text')] },
];

const SEARCHED_COLUMNS = ['run_id', 'project_id', 'lane', 'decision', 'last_error'];

export async function walkRuns(
  q: Queryable,
  query: { state?: RunState | undefined; project_id?: string | undefined; search?: string | undefined; order: KeysetOrder; after: string[] | null; limit: number },
): Promise<KeysetPage<RunListRow>> {
  const sql = sqlParams();
  const where: string[] = [];
  if (query.state) where.push(`state = ${sql.bind(query.state)}`);
  if (query.project_id) where.push(`project_id = ${sql.bind(query.project_id)}`);
  if (query.search) {
    const pattern = sql.bind(containsPattern(query.search));
    where.push(`(${SEARCHED_COLUMNS.map((column) => `${column} ILIKE ${pattern}`).join(' OR ')})`);
  }
  return selectKeysetPage<RunListRow>(q, {
    select: RUN_LIST_COLUMNS,
    from: 'FROM runs',
    table: 'runs',
    where,
    sql,
    order: query.order,
    after: query.after,
    limit: query.limit,
  });
}

export async function getRunSummary(q: Queryable, runId: string): Promise<RunListRow | undefined> {
  const result = await q.query<RunListRow>(`SELECT ${RUN_LIST_COLUMNS} FROM runs WHERE run_id = $1`, [runId]);
  return result.rows[0];
}

/** The runs not finished yet, oldest first, at most `limit` of them. */
export async function activeRuns(q: Queryable, limit: number): Promise<RunListRow[]> {
  const result = await q.query<RunListRow>(
    `SELECT ${RUN_LIST_COLUMNS} FROM runs WHERE state <> ALL($1::text[]) ORDER BY created_at, run_id LIMIT $2`,
    [[...FINISHED_RUN_STATES], limit],
  );
  return result.rows;
}

/**
 * When the queue last moved: the newest run start (a claim) or run end. Before any run, when the oldest queued item was
 * queued; null with neither (nothing has waited yet).
 */
export async function queueLastMovedAt(q: Queryable): Promise<string | null> {
  const result = await q.query<{ moved_at: string | null }>(
    `SELECT coalesce(
       (SELECT greatest(max(created_at), max(finished_at)) FROM runs),
       (SELECT min(created_at) FROM queue_items WHERE status = 'queued')
     ) AS moved_at`,
  );
  return result.rows[0]?.moved_at ?? null;
}
