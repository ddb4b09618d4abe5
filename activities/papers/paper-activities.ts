import type { EvidenceSummary } from '../../capabilities/papers/paper-ledger.ts';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { syncEvidence } from '../../capabilities/papers/evidence-sync.ts';
import { automatedChecklistPassed, judgeDraft, type ChecklistJudgement } from '../../capabilities/papers/domain/paper-checklist.ts';
import { resultValues } from '../../capabilities/papers/domain/paper-draft.ts';
import { secretFindingReason, type SecretFinding, type SecretScanStage } from '../../capabilities/papers/domain/evidence-secrets.ts';
import { draftEvidenceOf, evidenceChangeSince, readEvidence, RecordedHashesSchema } from '../../capabilities/papers/paper-evidence.ts';
import { holdPaperForSecrets } from '../../capabilities/papers/paper-secret-hold.ts';
import { selectDraftCandidates } from '../../capabilities/papers/paper-drafting.ts';
import { createPaperDrafts, type DraftOutcome, type StepRef } from '../../capabilities/papers/paper-drafts.ts';
import type { PaperSettings } from '../../capabilities/papers/paper-settings.ts';
import { DRAFT_FILES, PaperWriterFailedError, readDraftArtifact, storeDraft, writePaper, type DraftArtifact, type WriterName } from '../../capabilities/papers/paper-writing.ts';
import { getProject } from '../../capabilities/runs/projects.ts';
import { getRun } from '../../capabilities/runs/run-ledger.ts';
import type { Store } from '../../platform/store/store.ts';
import type { PaperStatus } from '../../capabilities/papers/domain/paper-status.ts';
import { PAPER_FAILURE_TYPES } from '../../capabilities/papers/domain/paper-steps.ts';
import type { DraftCandidates, DraftCandidatesRequest, EvidenceSyncDetail, PaperRef } from '../../workflows/papers/paper-messages.ts';
import { heartbeating } from '../heartbeat.ts';

/**
 * Activities of the paper workflow (workflows/papers/paper-workflow.ts). Each is idempotent by business key: the ledger steps by the
 * step's key (capabilities/papers/paper-drafts.ts), the draft's files by paper_id (a retry rewrites them whole).
 */

export interface GatheredEvidence {
  complete: boolean;
  project_path: string;
  missing: string[];
  evidence_sync: EvidenceSyncDetail | null;
  /** Set when the evidence holds secret values of this service: the paper is held, and the step refused with this. */
  held?: { reason: string; secrets: SecretFinding[] };
}

/** The key of the paper step this activity belongs to: `<workflow id>/<run id>`, as StepRef.step_key. */
function stepKeyOfActivity(): string {
  const execution = Context.current().info.workflowExecution;
  if (!execution) throw ApplicationFailure.nonRetryable('a paper activity runs inside a paper workflow', PAPER_FAILURE_TYPES.unknownPaper);
  return `${execution.workflowId}/${execution.runId}`;
}

export interface WrittenDraftRecord {
  title: string;
  abstract: string;
  writer: WriterName;
  writer_fallback_reason: string | null;
  draft_dir: string;
  draft_artifacts: DraftArtifact[];
  evidence_summary: EvidenceSummary;
}

export function createPaperActivities(deps: { store: Store; papers: PaperSettings }) {
  const { store, papers: settings } = deps;
  const drafts = createPaperDrafts(store);
  const { secrets } = settings;

  /** Holds the paper for a person, once per step, and answers the refusal's reason. */
  async function hold(ref: PaperRef, stage: SecretScanStage, findings: SecretFinding[]): Promise<string> {
    const info = Context.current().info;
    const held = await holdPaperForSecrets(store, {
      paper: ref,
      stage,
      findings,
      requested_by: `paper-workflow:${info.workflowType}`,
      key: stepKeyOfActivity(),
      request_key: null,
    });
    return held.reason;
  }

  /** Holds the paper and fails the step for good: nothing (more) is sent to a writer or recorded. */
  async function refuseSecrets(ref: PaperRef, stage: SecretScanStage, findings: SecretFinding[]): Promise<never> {
    await hold(ref, stage, findings);
    throw ApplicationFailure.nonRetryable(secretFindingReason(stage, findings), PAPER_FAILURE_TYPES.evidenceSecret, findings);
  }

  /** The run and its project, as the writers need them. */
  async function subjectOf(ref: PaperRef) {
    const [run, project] = await Promise.all([getRun(store, ref.run_id), getProject(store, ref.project_id)]);
    if (!run || !project) throw ApplicationFailure.nonRetryable(`paper '${ref.paper_id}' names a run or project that does not exist`, PAPER_FAILURE_TYPES.unknownPaper);
    return { run, project };
  }

  return {
    /** The next candidates of a draft-next (workflows/papers/draft-next-workflow.ts), read afresh on a retry: it starts nothing. */
    selectDraftCandidates: (request: DraftCandidatesRequest): Promise<DraftCandidates> => selectDraftCandidates({ store, settings }, request.force, request.up_to, request.exclude),

    /**
     * Copies the evidence from the worker when evidence sync is on, then checks the control plane's copy of it. The file
     * steps heartbeat throughout, hashing included: the workflow gives them a heartbeat timeout (workflows/papers/paper-workflow.ts),
     * and large evidence takes longer to hash than that.
     */
    gatherPaperEvidence: (ref: PaperRef): Promise<GatheredEvidence> => heartbeating(async () => {
      const { project } = await subjectOf(ref);
      const target = { project_root: settings.projectRoot, project_dir: project.project_dir };
      const sync = settings.evidenceSync ? await syncEvidence(settings.evidenceSync, target) : null;
      const read = await readEvidence(settings.projectRoot, project.project_dir, { secrets });
      if (read.secrets.length > 0) {
        const reason = await hold(ref, 'paper_step', read.secrets);
        return { complete: false, project_path: read.project_path, missing: read.missing, evidence_sync: sync, held: { reason, secrets: read.secrets } };
      }
      // Over its caps on the worker, the evidence is missing even where an older copy of it is here.
      if (sync?.over_cap) return { complete: false, project_path: read.project_path, missing: [sync.error ?? 'the evidence is over its cap'], evidence_sync: sync };
      return { complete: read.complete, project_path: read.project_path, missing: read.missing, evidence_sync: sync };
    }),

    /** Writes the draft with the configured writer and stores its files. A hosted writer's failure without fallback is final. */
    writePaperDraft: (ref: PaperRef): Promise<WrittenDraftRecord> => heartbeating(async () => {
      const { run, project } = await subjectOf(ref);
      const read = await readEvidence(settings.projectRoot, project.project_dir, { secrets });
      // The bytes read here are the ones the writer is given: checked again, as a file may have changed since the
      // evidence was gathered, and with what the run record adds (the gate's decision summary, from the agent too).
      if (read.secrets.length > 0) await refuseSecrets(ref, 'writer_request', read.secrets);
      if (!read.complete) throw ApplicationFailure.nonRetryable(`the evidence is incomplete: ${read.missing.join('; ')}`, PAPER_FAILURE_TYPES.evidenceMissing, read.missing);
      const evidence = draftEvidenceOf(read, { ...run, project_name: project.project_name });
      const inRequest = secrets.find(JSON.stringify(evidence));
      if (inRequest.length > 0) await refuseSecrets(ref, 'writer_request', [{ file: 'the run record (decision and its summary)', secrets: inRequest }]);
      let written;
      try {
        written = await writePaper(settings.writer, evidence, Context.current().cancellationSignal);
      } catch (error) {
        if (error instanceof PaperWriterFailedError) throw ApplicationFailure.nonRetryable(error.message, PAPER_FAILURE_TYPES.writerFailed);
        throw error;
      }
      // Each file's sha256 goes into the draft record: a package carries exactly these bytes or is refused.
      const evidenceSummary = { sha256: read.sha256, files: read.found, file_hashes: read.hashes.map(({ path, sha256, bytes }) => ({ path, sha256, bytes })), decision: evidence.decision };
      const stored = await storeDraft(settings.stateDir, ref.paper_id, written, evidenceSummary);
      return {
        title: written.draft.title,
        abstract: written.draft.abstract,
        writer: written.writer,
        writer_fallback_reason: written.fallback_reason,
        draft_dir: stored.draft_dir,
        draft_artifacts: stored.artifacts,
        evidence_summary: evidenceSummary,
      };
    }),

    /** The automated checklist, judged on the draft as stored (read back from disk) against the results files it was written from. */
    judgePaperDraft: (input: PaperRef & { draft: WrittenDraftRecord }): Promise<{ judgements: ChecklistJudgement[]; passed: boolean }> => heartbeating(async () => {
      const { project } = await subjectOf(input);
      const paper = input.draft.draft_artifacts.find((artifact) => artifact.path.endsWith(`/${DRAFT_FILES.paper}`));
      const markdown = paper ? await readDraftArtifact(settings.stateDir, paper) : null;
      const read = await readEvidence(settings.projectRoot, project.project_dir, { secrets });
      // Secrets that appeared while the writer wrote: the draft is not recorded, and the paper waits for a person.
      if (read.secrets.length > 0) await refuseSecrets(input, 'paper_step', read.secrets);
      // Judged against exactly the evidence the draft was written from: a project changed in between has lost that
      // evidence. A record without hashes comes from a step written by an earlier version, still in flight.
      const recorded = RecordedHashesSchema.safeParse(input.draft.evidence_summary.file_hashes);
      const change = !read.complete ? read.missing.join('; ') : recorded.success ? evidenceChangeSince(recorded.data, read.hashes) : null;
      if (change) throw ApplicationFailure.nonRetryable(`the evidence the draft was written from is no longer there: ${change}`, PAPER_FAILURE_TYPES.evidenceMissing, [change]);
      const judgements = judgeDraft({ markdown, title: input.draft.title, abstract: input.draft.abstract, results: resultValues(read.files.results) });
      return { judgements, passed: automatedChecklistPassed(judgements) };
    }),

    startPaperStep: (step: StepRef) => drafts.startStep(step),

    finishPaperStep(step: StepRef, draft: WrittenDraftRecord, checklist: { judgements: ChecklistJudgement[]; passed: boolean }) {
      const { title, writer, writer_fallback_reason, draft_dir, draft_artifacts, evidence_summary } = draft;
      const outcome: DraftOutcome = {
        title,
        writer,
        writer_fallback_reason,
        draft_dir,
        draft_artifacts,
        evidence_summary,
        judgements: checklist.judgements,
        checklist_passed: checklist.passed,
      };
      return drafts.finishStep(step, outcome);
    },

    abandonPaperStep: (step: StepRef, from: PaperStatus, error: string) => drafts.abandonStep(step, from, error),
  };
}

export type PaperActivities = ReturnType<typeof createPaperActivities>;
