import type { ChecklistJudgement } from './domain/paper-checklist.ts';
import { finishStep, startStep, type DraftPurpose } from './domain/paper-steps.ts';
import { HUMAN_CHECKLIST_ITEM_IDS, type PaperStatus } from './domain/paper-status.ts';
import { appendAuditEvent, findAuditEventByKey } from '../../platform/store/audit-events.ts';
import { ensurePaper, listGeneratingPapers, recordDraft, type StoredDraft } from './store/draft-ledger.ts';
import { getPaper, setPaperStatus, upsertChecklistItem } from './paper-ledger.ts';
import type { Store } from '../../platform/store/store.ts';
import { recomputePaperRank } from './paper-rerank.ts';
import { heldForSecrets } from './paper-secret-hold.ts';

/**
 * The ledger side of one drafting step of a paper (docs/papers.md#papers): start it, record its draft, or give it up. Each
 * is one transaction with its audit event, and happens once per step: a step is named by `step_key` (the workflow
 * execution), and its audit events carry that key, so a retried call finds its own event and changes nothing again.
 */

export interface StepRef {
  paper_id: string;
  project_id: string;
  run_id: string;
  purpose: DraftPurpose;
  requested_by: string;
  /** Unique per step: `<workflow id>/<run id>` of the paper workflow. */
  step_key: string;
  /** The request's idempotency key, when it had one. */
  request_key: string | null;
}

export type StepStarted = { started: true; from: PaperStatus } | { started: false; reason: string };

const STARTED_EVENT: Record<DraftPurpose, string> = { draft: 'paper.draft_started', rewrite: 'paper_review.rewrite_started' };
const FINISHED_EVENT: Record<DraftPurpose, string> = { draft: 'paper.drafted', rewrite: 'paper_review.draft_rewritten' };
const FAILED_EVENT: Record<DraftPurpose, string> = { draft: 'paper.draft_failed', rewrite: 'paper_review.rewrite_failed' };
/** Events are named `<entity>.<action>`, and carry that entity as their entity_type. */
const entityOf = (eventType: string) => eventType.slice(0, eventType.indexOf('.'));

/** A step that holds its paper in draft_generating or publication_generating, and the paper workflow it runs in. */
export interface StepHoldingPaper {
  step: StepRef;
  /** Where the paper was when the step started: where abandoning it returns the paper. */
  from: PaperStatus;
  workflow_id: string;
  workflow_run_id: string;
}

export interface DraftOutcome extends Omit<StoredDraft, 'paper_status' | 'rewrite'> {
  judgements: ChecklistJudgement[];
  checklist_passed: boolean;
}

export function createPaperDrafts(store: Store, clock: () => Date = () => new Date()) {
  const audit = (tx: Parameters<typeof appendAuditEvent>[0], step: StepRef, eventType: string, payload: Record<string, unknown>) =>
    appendAuditEvent(tx, {
      entity_type: entityOf(eventType),
      entity_id: step.paper_id,
      event_type: eventType,
      payload: { ...payload, request_key: step.request_key },
      idempotency_key: step.step_key,
      actor: step.requested_by,
    });

  return {
    /** Moves the paper to draft_generating or publication_generating; a draft creates the paper when the run has none. */
    startStep(step: StepRef): Promise<StepStarted> {
      return store.transaction(async (tx) => {
        const earlier = await findAuditEventByKey(tx, STARTED_EVENT[step.purpose], step.step_key);
        if (earlier) return { started: true, from: earlier.payload.from as PaperStatus };
        const paper = step.purpose === 'draft' ? await ensurePaper(tx, step) : await getPaper(tx, step.paper_id, { forUpdate: true });
        if (!paper) return { started: false, reason: `paper '${step.paper_id}' does not exist` };
        const start = startStep(step.purpose, paper);
        if (!start.ok) return { started: false, reason: start.reason };
        await setPaperStatus(tx, step.paper_id, start.to);
        await audit(tx, step, STARTED_EVENT[step.purpose], { from: paper.paper_status, to: start.to });
        return { started: true, from: paper.paper_status };
      });
    },

    /** Records the stored draft and the automated checklist's judgements, and moves the paper on. */
    finishStep(step: StepRef, outcome: DraftOutcome): Promise<{ paper_status: PaperStatus }> {
      return store.transaction(async (tx) => {
        const earlier = await findAuditEventByKey(tx, FINISHED_EVENT[step.purpose], step.step_key);
        if (earlier) return { paper_status: earlier.payload.to as PaperStatus };
        const paper = (await getPaper(tx, step.paper_id, { forUpdate: true }))!;
        const to = finishStep(step.purpose, outcome.checklist_passed);
        const { judgements, checklist_passed: _passed, ...draft } = outcome;
        await recordDraft(tx, step.paper_id, { ...draft, paper_status: to, rewrite: step.purpose === 'rewrite' });
        for (const judgement of judgements) {
          // Items only a person judges are left as they are: a redraft does not undo a person's verdict.
          if ((HUMAN_CHECKLIST_ITEM_IDS as readonly string[]).includes(judgement.item_id)) continue;
          await upsertChecklistItem(tx, step.paper_id, { ...judgement, judged_by: 'automated' });
        }
        await recomputePaperRank(tx, step.paper_id, clock());
        await audit(tx, step, FINISHED_EVENT[step.purpose], {
          from: paper.paper_status,
          to,
          writer: outcome.writer,
          writer_fallback_reason: outcome.writer_fallback_reason,
          artifacts: outcome.draft_artifacts,
          checklist: Object.fromEntries(judgements.map((judgement) => [judgement.item_id, judgement.status])),
        });
        return { paper_status: to };
      });
    },

    /**
     * A step that could not write its draft returns the paper to where it was, and says why in the audit log; one
     * whose evidence held secrets leaves it where the hold put it, waiting for a person.
     */
    abandonStep(step: StepRef, from: PaperStatus, error: string): Promise<void> {
      return store.transaction(async (tx) => {
        if (await findAuditEventByKey(tx, FAILED_EVENT[step.purpose], step.step_key)) return;
        // A step recorded already (a cancellation that came as it committed) keeps its draft.
        if (await findAuditEventByKey(tx, FINISHED_EVENT[step.purpose], step.step_key)) return;
        const paper = (await getPaper(tx, step.paper_id, { forUpdate: true }))!;
        const to = (await heldForSecrets(tx, step.step_key)) ? paper.paper_status : from;
        await setPaperStatus(tx, step.paper_id, to);
        await audit(tx, step, FAILED_EVENT[step.purpose], { from: paper.paper_status, to, error });
      });
    },

    /**
     * Each paper in draft_generating or publication_generating: `steps` with the step that put it there, `unheld` those
     * no step put there (no started event of theirs), which no workflow will ever give back.
     */
    async papersInGeneration(): Promise<{ steps: StepHoldingPaper[]; unheld: { paper_id: string; paper_status: PaperStatus }[] }> {
      const purposes = Object.entries(STARTED_EVENT) as [DraftPurpose, string][];
      const rows = await listGeneratingPapers(store, Object.values(STARTED_EVENT));
      const steps: StepHoldingPaper[] = [];
      const unheld: { paper_id: string; paper_status: PaperStatus }[] = [];
      for (const row of rows) {
        if (row.event_type === null || row.idempotency_key === null || row.payload === null) {
          unheld.push({ paper_id: row.paper_id, paper_status: row.paper_status });
          continue;
        }
        const eventType = row.event_type;
        const purpose = purposes.find(([, started]) => started === eventType)![0];
        // The key is `<workflow id>/<run id>`; a run id holds no slash.
        const split = row.idempotency_key.lastIndexOf('/');
        steps.push({
          step: {
            paper_id: row.paper_id,
            project_id: row.project_id,
            run_id: row.run_id,
            purpose,
            requested_by: row.actor ?? 'unknown',
            step_key: row.idempotency_key,
            request_key: typeof row.payload.request_key === 'string' ? row.payload.request_key : null,
          },
          from: row.payload.from as PaperStatus,
          workflow_id: row.idempotency_key.slice(0, split),
          workflow_run_id: row.idempotency_key.slice(split + 1),
        });
      }
      return { steps, unheld };
    },

    /**
     * Gives back a paper in draft_generating or publication_generating that no step holds. Where it came from is not
     * known, so it goes to human_review_required, where a person decides, as a paper held for its evidence's secrets
     * does; false when it has left that status meanwhile.
     */
    giveBackUnheldPaper(paperId: string, error: string): Promise<boolean> {
      return store.transaction(async (tx) => {
        const paper = await getPaper(tx, paperId, { forUpdate: true });
        if (!paper || (paper.paper_status !== 'draft_generating' && paper.paper_status !== 'publication_generating')) return false;
        const eventType = FAILED_EVENT[paper.paper_status === 'draft_generating' ? 'draft' : 'rewrite'];
        const to: PaperStatus = 'human_review_required';
        await setPaperStatus(tx, paperId, to);
        await appendAuditEvent(tx, { entity_type: entityOf(eventType), entity_id: paperId, event_type: eventType, payload: { from: paper.paper_status, to, error } });
        return true;
      });
    },
  };
}

export type PaperDrafts = ReturnType<typeof createPaperDrafts>;
