import type { KeysetOrder } from '../../platform/store/keyset.ts';
import {
  CANDIDATE_ORDER,
  candidatesSharingDedupeKeys,
  papersOfProjects,
  projectsOfCandidates,
  runsOfProjects,
  sourcesByIds,
  walkLineageCandidates,
  type CandidateScope,
} from './store/source-lineage-reads.ts';
import type { Queryable } from '../../platform/store/store.ts';

export const SOURCE_LINEAGE_ORDERS: readonly KeysetOrder[] = [CANDIDATE_ORDER];

/**
 * `GET /control/api/v1/source-lineage` (docs/console.md#read-models): for each candidate of the page, newest first, its
 * sources, its dedupe context, and what came of it: idea, project and queue status, runs and their decisions, papers.
 */
export async function readSourceLineage(q: Queryable, scope: CandidateScope, walk: { after: string[] | null; limit: number }) {
  const page = await walkLineageCandidates(q, scope, walk);
  const candidateIds = page.items.map((candidate) => candidate.candidate_id);
  const [sources, sharing, projects] = await Promise.all([
    sourcesByIds(q, [...new Set(page.items.flatMap((candidate) => candidate.source_ids))]),
    candidatesSharingDedupeKeys(q, page.items.map((candidate) => candidate.dedupe_key), candidateIds),
    projectsOfCandidates(q, candidateIds),
  ]);
  const projectIds = projects.map((project) => project.project_id);
  const [runs, papers] = await Promise.all([runsOfProjects(q, projectIds), papersOfProjects(q, projectIds)]);

  const items = page.items.map((candidate) => {
    const project = projects.find((row) => row.candidate_id === candidate.candidate_id) ?? null;
    return {
      candidate,
      sources: candidate.source_ids.map((id) => sources.find((source) => source.source_id === id) ?? { source_id: id, missing: true as const }),
      dedupe: {
        dedupe_key: candidate.dedupe_key,
        merged_into: candidate.merged_into,
        similar_prior_projects: candidate.similar_prior_projects,
        same_dedupe_key: sharing.filter((row) => row.dedupe_key === candidate.dedupe_key).map(({ dedupe_key: _key, ...row }) => row),
      },
      idea_id: project?.idea_id ?? null,
      project: project ? { project_id: project.project_id, project_name: project.project_name, queue_status: project.queue_status } : null,
      runs: project ? runs.filter((run) => run.project_id === project.project_id).map(({ project_id: _project, ...run }) => run) : [],
      papers: project ? papers.filter((paper) => paper.project_id === project.project_id).map(({ project_id: _project, ...paper }) => paper) : [],
    };
  });
  return { items, next: page.next };
}
