import { z } from 'zod';
import { PAPER_ACTIONS, PAPER_STAGES } from '../../capabilities/papers/domain/paper-stage.ts';
import { CHECKLIST_ITEM_IDS, CHECKLIST_STATUSES, PAPER_STATUSES, REVIEW_STATUSES } from '../../capabilities/papers/domain/paper-status.ts';
import type { Assert, Documents } from '../../platform/http/responses.ts';
import type { FinalizationPackageRow } from '../../capabilities/papers/paper-reads.ts';
import type { ChecklistItemRow, CorpusImportRow, PaperRow, ReviewHistoryRow } from '../../capabilities/papers/paper-ledger.ts';

/**
 * The papers room's answers: papers, their checklists, review history, finalization packages and corpus imports. A row
 * is this schema wherever it appears, and each names every column its row type has (`Documents` fails the build
 * otherwise).
 */

const EvidenceFileSchema = z.object({ path: z.string(), sha256: z.string(), bytes: z.number().int() });

/** What a draft was written from, as its draft step recorded it. */
const EvidenceSummarySchema = z.object({
  sha256: z.string().describe('Of the evidence files together'),
  files: z.array(z.string()),
  file_hashes: z.array(EvidenceFileSchema).optional().describe('Each file\'s sha256; absent in drafts recorded before packages checked them'),
  decision: z.string().nullable(),
});

/** A paper: the paper lists, its detail, a project's and a run's detail all show this row. */
export const PaperSchema = z.object({
  paper_id: z.string(),
  project_id: z.string(),
  run_id: z.string(),
  paper_status: z.enum(PAPER_STATUSES),
  review_status: z.enum(REVIEW_STATUSES),
  rank_score: z.number(),
  rank_reasons: z.array(z.string()),
  title: z.string().nullable(),
  writer: z.enum(['deterministic', 'hosted']).nullable(),
  writer_fallback_reason: z.string().nullable(),
  draft_dir: z.string().nullable().describe('Relative to state_dir'),
  draft_artifacts: z.array(EvidenceFileSchema),
  evidence_summary: EvidenceSummarySchema.nullable(),
  draft_count: z.number().int(),
  drafted_at: z.string().nullable(),
  rewrite_count: z.number().int(),
  rewritten_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  imported: z.boolean().describe('A corpus import is recorded for the paper'),
  stage: z.enum(PAPER_STAGES).describe('Where the paper stands, to show a person: imported once a corpus import is recorded, finalized once the review is, else paper_status (which stays where the last draft left it)'),
  operator_actions: z.array(z.enum(PAPER_ACTIONS)).describe('The commands the paper takes now: rewrite_draft (POST …/rewrite-draft), set_checklist_item (…/checklist/{item_id}), move_review (…/status), prepare_finalization_package, record_import; none once imported'),
}).meta({ id: 'Paper' });
export type PaperDocumented = Assert<Documents<typeof PaperSchema, PaperRow>>;

export const ChecklistItemSchema = z.object({
  item_id: z.enum(CHECKLIST_ITEM_IDS),
  status: z.enum(CHECKLIST_STATUSES),
  note: z.string().nullable(),
  judged_by: z.string().nullable().describe('automated, or who set it'),
  updated_at: z.string().describe('For an item never written, when the paper was created'),
}).meta({ id: 'ChecklistItem' });
export type ChecklistItemDocumented = Assert<Documents<typeof ChecklistItemSchema, ChecklistItemRow>>;

/** A paper with its checklist, every item in the order of the item list. */
export const PaperWithChecklistSchema = PaperSchema.extend({ checklist: z.array(ChecklistItemSchema) });

export const ReviewHistorySchema = z.object({
  history_id: z.number().int(),
  paper_id: z.string(),
  from_status: z.enum(REVIEW_STATUSES).nullable(),
  to_status: z.enum(REVIEW_STATUSES),
  note: z.string().nullable(),
  blocker: z.string().nullable(),
  requested_by: z.string(),
  created_at: z.string(),
}).meta({ id: 'ReviewHistory' });
export type ReviewHistoryDocumented = Assert<Documents<typeof ReviewHistorySchema, ReviewHistoryRow>>;

export const FinalizationPackageSchema = z.object({
  package_id: z.number().int(),
  target_label: z.string(),
  package_dir: z.string().describe('Relative to state_dir'),
  manifest_sha256: z.string(),
  requested_by: z.string(),
  created_at: z.string(),
}).meta({ id: 'FinalizationPackage' });
export type FinalizationPackageDocumented = Assert<Documents<typeof FinalizationPackageSchema, FinalizationPackageRow>>;

export const CorpusImportSchema = z.object({
  paper_id: z.string(),
  corpus_repo: z.string(),
  commit_sha: z.string(),
  manifest_sha256: z.string(),
  requested_by: z.string(),
  created_at: z.string(),
}).meta({ id: 'CorpusImport' });
export type CorpusImportDocumented = Assert<Documents<typeof CorpusImportSchema, CorpusImportRow>>;
