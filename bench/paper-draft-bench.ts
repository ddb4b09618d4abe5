/**
 * The paper bench's (3) (bench/papers.ts): the deterministic draft of one paper (deterministicDraft) and its automated
 * checklist (judgeDraft), in process, `drafts` calls each after a warm-up.
 */
import { automatedChecklistPassed, judgeDraft } from '../capabilities/papers/domain/paper-checklist.ts';
import { deterministicDraft, resultValues, type DraftEvidence } from '../capabilities/papers/domain/paper-draft.ts';
import { draftEvidenceOf, readEvidence } from '../capabilities/papers/paper-evidence.ts';
import { ServiceSecrets } from '../platform/config/service-secrets.ts';
import { log, timeEach, type Stats } from './figures.ts';
import { writeProjectFiles } from './paper-bench-evidence.ts';

export interface DraftFigures {
  draft: Stats;
  judge: Stats;
  notesBytes: number;
  resultFiles: number;
  numbers: number;
  markdownBytes: number;
  passed: boolean;
  failed: string[];
}

export async function benchDraft(projectRoot: string, drafts: number): Promise<DraftFigures> {
  const projectDir = 'bench/draft-subject';
  await writeProjectFiles(projectRoot, projectDir, 'Bench project draft subject: sparse attention at small scale', 'complete');
  const read = await readEvidence(projectRoot, projectDir, { secrets: ServiceSecrets.none });
  if (!read.complete) throw new Error(`the draft subject's evidence is incomplete: ${read.missing.join('; ')}`);
  const evidence: DraftEvidence = draftEvidenceOf(read, {
    project_id: 'bench-draft-subject',
    project_name: 'Bench project draft subject: sparse attention at small scale',
    run_id: 'bench-draft-subject-20250601T120000Z',
    finished_at: '2025-06-01T12:42:00.000Z',
    decision: 'finalize_positive',
    decision_summary: null,
  });
  const draft = deterministicDraft(evidence);
  const review = () => judgeDraft({ markdown: draft.markdown, title: draft.title, abstract: draft.abstract, results: resultValues(evidence.results) });
  const judgements = review();
  const warmup = Math.min(200, drafts);
  for (let i = 0; i < warmup; i++) {
    deterministicDraft(evidence);
    review();
  }
  log(`(3) deterministicDraft and judgeDraft: ${drafts} calls each`);
  const drafted = await timeEach(drafts, () => deterministicDraft(evidence));
  const judged = await timeEach(drafts, review);
  return {
    draft: drafted,
    judge: judged,
    notesBytes: Buffer.byteLength(evidence.run_notes),
    resultFiles: evidence.results.length,
    numbers: resultValues(evidence.results).length,
    markdownBytes: Buffer.byteLength(draft.markdown),
    passed: automatedChecklistPassed(judgements),
    failed: judgements.filter((j) => j.status === 'fail').map((j) => `${j.item_id}: ${j.note}`),
  };
}
