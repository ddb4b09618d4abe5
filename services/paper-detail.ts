import { listEventsForEntities } from '../store/project-reads.ts';
import { listFinalizationPackages, listReviewHistory } from '../store/paper-reads.ts';
import { getCorpusImport, getPaper } from '../store/papers.ts';
import { getProject } from '../store/projects.ts';
import { getRunSummary } from '../store/run-reads.ts';
import type { Queryable } from '../store/store.ts';
import { paperWithChecklist } from './paper-reviews.ts';

/** One paper as `GET /control/api/v1/papers/{paper_id}` shows it; undefined when there is no such paper. */
export async function paperDetail(q: Queryable, paperId: string, eventLimit: number) {
  const paper = await getPaper(q, paperId);
  if (!paper) return undefined;
  const [withChecklist, project, run, reviewHistory, packages, corpusImport, events] = await Promise.all([
    paperWithChecklist(q, paper),
    getProject(q, paper.project_id),
    getRunSummary(q, paper.run_id),
    listReviewHistory(q, paperId),
    listFinalizationPackages(q, paperId),
    getCorpusImport(q, paperId),
    listEventsForEntities(q, [paperId], eventLimit),
  ]);
  return {
    paper: withChecklist,
    project: project ?? null,
    run: run ?? null,
    review_history: reviewHistory,
    finalization_packages: packages,
    corpus_import: corpusImport ?? null,
    events,
  };
}
