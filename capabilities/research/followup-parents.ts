import type { FollowupParent } from './domain/followup-candidate.ts';
import type { Queryable } from '../../platform/store/store.ts';

/**
 * The next run that may get a follow-up (docs/research.md#follow-ups): reconciled (completed), decided negative, inconclusive or mixed, with
 * no paper, and no follow-up candidate linked from it yet; the earliest finished first. With `lock` (inside a
 * transaction) the run's row is locked and a run another call holds is passed over, so two calls never build a
 * follow-up of one parent.
 */
export async function nextFollowupParent(q: Queryable, options: { lock: boolean }): Promise<FollowupParent | null> {
  for (let tries = 0; tries < MAX_LOCK_TRIES; tries += 1) {
    const parent = await firstEligible(q, options.lock);
    // A row locked after another transaction committed its follow-up still passed the statement's older snapshot:
    // a fresh statement sees that follow-up, and the next parent is tried.
    if (!parent || !options.lock || !(await hasFollowup(q, parent.run_id))) return parent;
  }
  return null;
}

/** How many parents one call passes over, each taken by a concurrent call, before it answers that none is left. */
const MAX_LOCK_TRIES = 5;

async function hasFollowup(q: Queryable, runId: string): Promise<boolean> {
  const found = await q.query(`SELECT 1 FROM research_lineage WHERE from_kind = 'run' AND from_id = $1 AND to_kind = 'followup_candidate' LIMIT 1`, [runId]);
  return found.rowCount > 0;
}

async function firstEligible(q: Queryable, lock: boolean): Promise<FollowupParent | null> {
  const result = await q.query<FollowupParent>(
    `SELECT r.run_id, r.project_id, p.project_name, r.decision, r.decision_summary, p.machine_target, p.workload_class,
            CASE WHEN c.candidate_id IS NULL THEN NULL ELSE json_build_object(
              'hypothesis', c.hypothesis, 'mechanism', c.mechanism, 'baseline_to_beat', c.baseline_to_beat,
              'success_threshold', c.success_threshold, 'kill_condition', c.kill_condition,
              'expected_artifacts', c.expected_artifacts, 'required_evidence', c.required_evidence,
              'estimated_runtime_class', c.estimated_runtime_class, 'likely_failure_modes', c.likely_failure_modes,
              'novelty', c.novelty, 'feasibility', c.feasibility, 'accessibility', c.accessibility,
              'falsifiability', c.falsifiability) END AS contract
       FROM runs r
       JOIN projects p ON p.project_id = r.project_id
       LEFT JOIN research_candidates c ON c.candidate_id = p.candidate_id
      WHERE r.state = 'reconciled' AND r.paper_status IS NULL
        AND (r.decision ILIKE '%negative%' OR lower(btrim(r.decision)) IN ('inconclusive', 'mixed'))
        AND NOT EXISTS (SELECT 1 FROM research_lineage l
                         WHERE l.from_kind = 'run' AND l.from_id = r.run_id AND l.to_kind = 'followup_candidate')
      ORDER BY r.finished_at, r.run_id
      LIMIT 1
      ${lock ? 'FOR UPDATE OF r SKIP LOCKED' : ''}`,
  );
  return result.rows[0] ?? null;
}
