import { resolve, sep } from 'node:path';
import { REVIEW_STATUS_MOVES } from './domain/paper-status.ts';
import { listEventsForEntities } from '../console/project-reads.ts';
import { listFinalizationPackages, listReviewHistory } from './paper-reads.ts';
import { getCorpusImport, getPaper } from './paper-ledger.ts';
import { getProject } from '../runs/projects.ts';
import { getRunSummary } from '../runs/run-reads.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import { paperWithChecklist } from './paper-reviews.ts';
import { DRAFT_FILES, readDraftArtifact } from './paper-writing.ts';

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
    // The review_status values the status command accepts from here (none once the review is final).
    review_moves: [...REVIEW_STATUS_MOVES[paper.review_status]],
    project: project ?? null,
    run: run ?? null,
    review_history: reviewHistory,
    finalization_packages: packages,
    corpus_import: corpusImport ?? null,
    events,
  };
}

/** The largest draft this read serves; drafts are papers of a few tens of kilobytes, this bounds a damaged row. */
export const MAX_DRAFT_READ_BYTES = 4 * 1024 * 1024;

/**
 * The text of a paper's current draft (`paper.md`), read back from under `state_dir` and checked against the sha256
 * recorded with the draft: 404 before the first draft, 409 when the file is gone, no longer what was recorded, over
 * MAX_DRAFT_READ_BYTES, or recorded at a path outside `state_dir`.
 */
export async function paperDraftText(q: Queryable, stateDir: string, paperId: string) {
  const paper = await getPaper(q, paperId);
  if (!paper) throw new CommandRefusedError(404, `unknown paper '${paperId}'`);
  const artifact = paper.draft_artifacts.find((file) => file.path.endsWith(`/${DRAFT_FILES.paper}`));
  if (!artifact) throw new CommandRefusedError(404, `'${paperId}' has no draft yet: draft it first (draft-next)`);
  const root = resolve(stateDir);
  if (!resolve(root, artifact.path).startsWith(`${root}${sep}`)) throw new CommandRefusedError(409, `the draft of '${paperId}' is recorded outside state_dir`);
  if (artifact.bytes > MAX_DRAFT_READ_BYTES) throw new CommandRefusedError(409, `the draft is ${artifact.bytes} bytes, over the ${MAX_DRAFT_READ_BYTES} this read serves`);
  const markdown = await readDraftArtifact(stateDir, artifact);
  if (markdown === null) throw new CommandRefusedError(409, `the draft file ${artifact.path} is missing or changed since it was recorded: rewrite the draft`);
  return { paper_id: paperId, title: paper.title, writer: paper.writer, path: artifact.path, sha256: artifact.sha256, bytes: artifact.bytes, markdown };
}
