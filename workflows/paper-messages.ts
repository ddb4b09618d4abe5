import type { EvidenceSyncReport } from '../clients/evidence-sync.ts';
import type { DraftPurpose } from '../domain/paper-steps.ts';
import type { PaperStatus } from '../domain/paper-status.ts';

/** Messages of the paper workflows, shared by the workflows, the worker and the services (the client side). */

export const PAPER_WORKFLOW_TYPE = 'paperWorkflow';
export const REWRITE_BATCH_WORKFLOW_TYPE = 'paperRewriteBatchWorkflow';

/** `paper:<paper_id>`: one draft or rewrite of a paper runs at a time. */
export const paperWorkflowId = (paperId: string) => `paper:${paperId}`;
/** A batch is named by its request's idempotency key, so a replayed request finds the same batch. */
export const rewriteBatchWorkflowId = (idempotencyKey: string) => `paper-rewrite-batch:${idempotencyKey}`;

/** No secrets: workflow inputs are visible in the Temporal UI. */
export interface PaperWorkflowInput {
  paper_id: string;
  project_id: string;
  run_id: string;
  purpose: DraftPurpose;
  requested_by: string;
  /** The request's idempotency key, recorded in the audit event; null for draft-next, which has none. */
  request_key: string | null;
}

/** What evidence sync tried: the detail of a 424. */
export type EvidenceSyncDetail = EvidenceSyncReport;

export type PaperWorkflowResult =
  | {
      outcome: 'drafted';
      paper_id: string;
      purpose: DraftPurpose;
      paper_status: PaperStatus;
      writer: 'deterministic' | 'hosted';
      writer_fallback_reason: string | null;
      checklist_passed: boolean;
      evidence_sync: EvidenceSyncDetail | null;
    }
  | { outcome: 'evidence_missing'; paper_id: string; project_path: string; missing: string[]; evidence_sync: EvidenceSyncDetail | null }
  | { outcome: 'refused'; paper_id: string; reason: string }
  /** A step failed for good (the hosted writer without fallback, say); the paper is back where it was. */
  | { outcome: 'failed'; paper_id: string; error: string };

export interface RewriteBatchInput {
  papers: { paper_id: string; project_id: string; run_id: string }[];
  requested_by: string;
  request_key: string;
}

export interface RewriteBatchResult {
  results: PaperWorkflowResult[];
}
