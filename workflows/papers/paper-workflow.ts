import { ActivityFailure, ApplicationFailure, CancellationScope, isCancellation, patched, proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import type { PaperActivities } from '../../activities/papers/paper-activities.ts';
import type { SecretFinding } from '../../capabilities/papers/domain/evidence-secrets.ts';
import { PAPER_FAILURE_TYPES } from '../../capabilities/papers/domain/paper-steps.ts';
import type { StepRef } from '../../capabilities/papers/paper-drafts.ts';
import { paperActivityQueue, type PaperWorkflowInput, type PaperWorkflowResult } from './paper-messages.ts';
import { PAPER_PATCHES } from '../patches.ts';

/**
 * One draft or rewrite of a paper (docs/papers.md#papers), as workflow `paper:<paper_id>`: gather the evidence (synced from
 * the worker first when evidence sync is on) → start the step (the paper moves to draft_generating or
 * publication_generating) → write the draft with the configured writer and store it → judge the automated checklist on
 * the stored draft → record it all and move the paper on. Missing evidence stops it before anything is written; a
 * step that fails for good (a hosted writer failing without fallback), or is canceled, returns the paper to where it was.
 *
 * Histories of these workflows replay against this code: a change to the commands it records goes behind `patched()`
 * (docs/architecture.md#changing-a-workflow).
 */

type LedgerSteps = Pick<PaperActivities, 'startPaperStep' | 'finishPaperStep' | 'abandonPaperStep'>;
type FileSteps = Pick<PaperActivities, 'gatherPaperEvidence' | 'writePaperDraft' | 'judgePaperDraft'>;

const LEDGER_OPTIONS = {
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10 },
};
/** A ledger step with the summary the Temporal UI shows on its event (a summary is metadata: the same commands). */
const ledger = (summary: string) => proxyLocalActivities<LedgerSteps>({ ...LEDGER_OPTIONS, summary });

const NON_RETRYABLE = Object.values(PAPER_FAILURE_TYPES);

/**
 * The file steps run on the paper task queue (`<task queue>-papers`), whose worker runs a few at a time
 * (paper_activity_slots): a slow writer or sync holds none of the slots the runs' gate calls use.
 */
function fileSteps() {
  const taskQueue = paperActivityQueue(workflowInfo().taskQueue);
  return {
    /** Evidence sync and the checklist: bounded by the sync's own timeout, and heartbeating while they run. */
    files: proxyActivities<Pick<FileSteps, 'gatherPaperEvidence' | 'judgePaperDraft'>>({
      taskQueue,
      startToCloseTimeout: '15 minutes',
      heartbeatTimeout: '10 seconds',
      retry: { maximumAttempts: 3, nonRetryableErrorTypes: NON_RETRYABLE },
    }),
    /**
     * The writer: a hosted one may take minutes (paper_writer_timeout_sec), and heartbeats every second meanwhile, so a
     * worker that dies mid-call is noticed within the heartbeat timeout and the call goes to the restarted worker.
     */
    writer: proxyActivities<Pick<FileSteps, 'writePaperDraft'>>({
      taskQueue,
      startToCloseTimeout: '30 minutes',
      heartbeatTimeout: '10 seconds',
      retry: { maximumAttempts: 3, nonRetryableErrorTypes: NON_RETRYABLE },
    }),
  };
}

/** Why an activity failed for good (its retries spent, or a failure no retry can mend); null for anything else. */
function activityFailure(error: unknown): string | null {
  if (isCancellation(error)) return null;
  // A local activity's failure may arrive as the activity's own ApplicationFailure, without an ActivityFailure around it.
  if (error instanceof ApplicationFailure) return error.message;
  if (!(error instanceof ActivityFailure)) return null;
  return error.cause instanceof ApplicationFailure || error.cause instanceof Error ? error.cause.message : error.message;
}

/**
 * What the evidence lacked when it went missing between the check and the writing (a project whose files changed in
 * between, an agent's swapping included); null for any other failure.
 */
function evidenceLost(error: unknown): string[] | null {
  const failure = error instanceof ActivityFailure ? error.cause : error;
  if (!(failure instanceof ApplicationFailure) || failure.type !== PAPER_FAILURE_TYPES.evidenceMissing) return null;
  const missing = failure.details?.[0];
  return Array.isArray(missing) ? missing.map(String) : [failure.message];
}

/** The findings of a writer's request refused for the service's secrets (the paper is held already); null otherwise. */
function secretsRefused(error: unknown): { reason: string; secrets: SecretFinding[] } | null {
  const failure = error instanceof ActivityFailure ? error.cause : error;
  if (!(failure instanceof ApplicationFailure) || failure.type !== PAPER_FAILURE_TYPES.evidenceSecret) return null;
  const findings = failure.details?.[0];
  return { reason: failure.message, secrets: Array.isArray(findings) ? (findings as SecretFinding[]) : [] };
}

export async function paperWorkflow(input: PaperWorkflowInput): Promise<PaperWorkflowResult> {
  const info = workflowInfo();
  const { files, writer } = fileSteps();
  const step: StepRef = { ...input, step_key: `${info.workflowId}/${info.runId}` };
  const ref = { paper_id: input.paper_id, project_id: input.project_id, run_id: input.run_id };

  const evidence = await files.gatherPaperEvidence(ref);
  // Only evidence gathered by an activity that holds papers for secrets carries `held`, so histories from before
  // replay the branch below it.
  if (evidence.held && patched(PAPER_PATCHES.evidenceSecrets)) {
    return { outcome: 'held_for_review', paper_id: input.paper_id, reason: evidence.held.reason, secrets: evidence.held.secrets };
  }
  if (!evidence.complete) {
    return { outcome: 'evidence_missing', paper_id: input.paper_id, project_path: evidence.project_path, missing: evidence.missing, evidence_sync: evidence.evidence_sync };
  }

  const started = await ledger(`start the ${input.purpose} of ${input.paper_id}`).startPaperStep(step);
  if (!started.started) return { outcome: 'refused', paper_id: input.paper_id, reason: started.reason };

  let draft, checklist, finished;
  try {
    draft = await writer.writePaperDraft(ref);
    checklist = await files.judgePaperDraft({ ...ref, draft });
    finished = await ledger(`record the ${input.purpose} of ${input.paper_id}`).finishPaperStep(step, draft, checklist);
  } catch (error) {
    if (isCancellation(error) && patched(PAPER_PATCHES.stepCancellation)) {
      // The cancellation reaches every activity started in the workflow's scope: the ledger step that gives the
      // paper back runs outside it, or the paper would stay in its generating status.
      const reason = `the ${input.purpose} was canceled (workflow ${info.workflowId})`;
      await CancellationScope.nonCancellable(() => ledger(`abandon the ${input.purpose} of ${input.paper_id}: it was canceled`).abandonPaperStep(step, started.from, reason));
      throw error;
    }
    const reason = activityFailure(error);
    if (reason === null) throw error;
    await ledger(`abandon the ${input.purpose} of ${input.paper_id}: it failed`).abandonPaperStep(step, started.from, reason);
    const refused = secretsRefused(error);
    if (refused && patched(PAPER_PATCHES.evidenceSecrets)) return { outcome: 'held_for_review', paper_id: input.paper_id, ...refused };
    const missing = evidenceLost(error);
    if (missing) return { outcome: 'evidence_missing', paper_id: input.paper_id, project_path: evidence.project_path, missing, evidence_sync: evidence.evidence_sync };
    return { outcome: 'failed', paper_id: input.paper_id, error: reason };
  }
  return {
    outcome: 'drafted',
    paper_id: input.paper_id,
    purpose: input.purpose,
    paper_status: finished.paper_status,
    writer: draft.writer,
    writer_fallback_reason: draft.writer_fallback_reason,
    checklist_passed: checklist.passed,
    evidence_sync: evidence.evidence_sync,
  };
}
