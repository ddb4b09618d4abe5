import type { WorkloadClass } from '../../worker-gate/contract/workload.ts';
import type { Queryable } from '../../platform/store/store.ts';
import type { RunPromptContract } from './domain/run-prompt.ts';

/** The projects ledger: one row per project promotion created; its directory lives under project_root. */

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
  /** What a run of this project is asked to establish; copied from its candidate at promotion, else none. */
  research_contract?: RunPromptContract | null;
  /** The candidate's expected token budget, which a run's budget multiplies (docs/runs.md#research-contract). */
  expected_token_budget?: number | null;
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

export async function insertProject(tx: Queryable, project: ProjectInsert): Promise<ProjectRow> {
  const result = await tx.query<ProjectRow>(
    `INSERT INTO projects (project_id, project_name, project_dir, idea_id, candidate_id, workload_class, machine_target,
       research_contract, expected_token_budget)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${PROJECT_COLUMNS}`,
    [
      project.project_id,
      project.project_name,
      project.project_dir,
      project.idea_id ?? null,
      project.candidate_id ?? null,
      project.workload_class ?? 'unknown',
      project.machine_target ?? null,
      project.research_contract ? JSON.stringify(project.research_contract) : null,
      project.expected_token_budget ?? null,
    ],
  );
  return result.rows[0]!;
}

export async function getProject(q: Queryable, projectId: string): Promise<ProjectRow | undefined> {
  const result = await q.query<ProjectRow>(`SELECT ${PROJECT_COLUMNS} FROM projects WHERE project_id = $1`, [projectId]);
  return result.rows[0];
}

/** What a run's prompt and token budget take from its project (docs/runs.md#research-contract). */
export interface ProjectRunBrief {
  research_contract: RunPromptContract | null;
  expected_token_budget: number | null;
}

export async function getProjectRunBrief(q: Queryable, projectId: string): Promise<ProjectRunBrief | undefined> {
  const result = await q.query<ProjectRunBrief>(
    'SELECT research_contract, expected_token_budget FROM projects WHERE project_id = $1',
    [projectId],
  );
  return result.rows[0];
}
