import type { EvidenceSyncReport } from '../../capabilities/papers/evidence-sync.ts';
import type { SecretFinding } from '../../capabilities/papers/domain/evidence-secrets.ts';
import type { DraftPurpose } from '../../capabilities/papers/domain/paper-steps.ts';
import type { PaperStatus } from '../../capabilities/papers/domain/paper-status.ts';

/** Messages of the paper workflows, shared by the workflows, the worker and the services (the client side). */

export const PAPER_WORKFLOW_TYPE = 'paperWorkflow';
export const REWRITE_BATCH_WORKFLOW_TYPE = 'paperRewriteBatchWorkflow';
export const DRAFT_NEXT_WORKFLOW_TYPE = 'paperDraftNextWorkflow';

/** The task queue of the paper workflows' file steps (evidence sync, the writer, the checklist): apart from the runs'. */
export const paperActivityQueue = (taskQueue: string) => `${taskQueue}-papers`;

/** `paper:<paper_id>`: one draft or rewrite of a paper runs at a time. */
export const paperWorkflowId = (paperId: string) => `paper:${paperId}`;
/** A batch is named by its request's idempotency key, so a replayed request finds the same batch. */
export const rewriteBatchWorkflowId = (idempotencyKey: string) => `paper-rewrite-batch:${idempotencyKey}`;

/**
 * A draft-next is named by who runs it: `paper-draft-next:queue-pump:<task queue>` (the pump runs one at a time),
 * `paper-draft-next:research-cycle:<cycle id>` (a cycle drafts once), `paper-draft-next:request:<uuid>` (an HTTP call,
 * which has no key of its own).
 */
export const draftNextWorkflowId = (owner: string) => `paper-draft-next:${owner}`;
/** The owners a draft-next's id names. */
export const draftNextOwner = {
  queuePump: (taskQueue: string) => `queue-pump:${taskQueue}`,
  researchCycle: (cycleId: string) => `research-cycle:${cycleId}`,
  request: (requestId: string) => `request:${requestId}`,
};

export interface PaperRef {
  paper_id: string;
  project_id: string;
  run_id: string;
}

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
  /** The evidence holds secret values of this service: nothing was written or sent, and the paper waits for a person. */
  | { outcome: 'held_for_review'; paper_id: string; reason: string; secrets: SecretFinding[] }
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

export interface DraftNextInput {
  requested_by: string;
  /** Drafted papers may be drafted again. */
  force: boolean;
  /** Recorded in each paper step's audit event: the cycle's key, or null. */
  request_key: string | null;
}

/** A candidate draft-next passed over, and why: the answer names each, so a person sees what waits on what. */
export interface SkippedCandidate extends PaperRef {
  reason: 'missing_evidence' | 'in_progress' | 'refused';
  detail: string;
  missing?: string[];
  evidence_sync?: EvidenceSyncDetail | null;
}

export interface DraftCandidatesRequest {
  force: boolean;
  /** At most this many candidates whose evidence is complete here. */
  up_to: number;
  /** Papers tried or skipped already. */
  exclude: string[];
}

/** The candidates of a draft-next, in the order it tries them, and those already passed over (evidence missing here). */
export interface DraftCandidates {
  candidates: PaperRef[];
  skipped: SkippedCandidate[];
  /** How many candidates were looked at, for the reason of a noop. */
  looked_at: number;
}

export type DraftNextResult =
  | (PaperRef & { action: 'drafted'; result: Extract<PaperWorkflowResult, { outcome: 'drafted' }>; skipped: SkippedCandidate[] })
  /** The writer failed for good on this candidate; the paper is back where it was. */
  | (PaperRef & { action: 'failed'; error: string; skipped: SkippedCandidate[] })
  /** This candidate's evidence holds secret values of this service: the draft-next stops here, refused. */
  | (PaperRef & { action: 'held_for_review'; reason: string; secrets: SecretFinding[]; skipped: SkippedCandidate[] })
  | { action: 'noop'; reason: string; skipped: SkippedCandidate[] };
