import { secretFindingReason, type SecretFinding } from './domain/evidence-secrets.ts';
import { paperActionRefusal } from './domain/paper-stage.ts';
import { paperIdFor } from './domain/paper-status.ts';
import { draftNextNoopReason, FINAL_REVIEW_STATUSES, type DraftPurpose } from './domain/paper-steps.ts';
import { claimKey, completeKey, notePending, releaseKey } from '../../platform/store/idempotency-keys.ts';
import { listDraftCandidates, type DraftCandidateRow } from './store/draft-ledger.ts';
import { getPaper, listRewriteSelection, type PaperRow } from './paper-ledger.ts';
import type { Store } from '../../platform/store/store.ts';
import type { DraftCandidates, PaperRef, PaperWorkflowResult, SkippedCandidate } from '../../workflows/papers/paper-messages.ts';
import { CommandRefusedError, replayAnswer, type KeptRefusal } from '../../platform/command-errors.ts';
import { readEvidence, type ReadEvidence } from './paper-evidence.ts';
import { PaperWorkflowCanceledError, type PaperLauncher } from './paper-launcher.ts';
import { paperWithChecklist } from './paper-reviews.ts';
import type { PaperSettings } from './paper-settings.ts';

/**
 * Drafting commands (docs/papers.md#papers): draft-next, rewrite-draft and rewrite-batch. Each live call runs paper
 * workflows and waits for them; a dry run reads and writes nothing but its answer.
 */

export interface DraftNextRequest {
  dry_run: boolean;
  requested_by: string;
  force: boolean;
}

export interface RewriteRequest {
  idempotency_key: string;
  requested_by: string;
  force: boolean;
}

export interface RewriteBatchRequest extends RewriteRequest {
  paper_status?: string | undefined;
  review_status?: string | undefined;
  search?: string | undefined;
  limit: number;
  dry_run: boolean;
  skip_rewritten: boolean;
}

/** Candidates draft-next looks at in one call: the skipped ones are reported, so the answer stays bounded. */
export const DRAFT_NEXT_CANDIDATES = 20;

/** Reviews a person is in the middle of: their draft is rewritten only with `force`. */
const REVIEWS_UNDER_WAY = ['in_review', 'approved_for_finalization'];

const candidateRef = (candidate: DraftCandidateRow): PaperRef => ({
  paper_id: candidate.paper_id ?? paperIdFor(candidate.project_id, candidate.run_id),
  project_id: candidate.project_id,
  run_id: candidate.run_id,
});

interface ScreenedCandidate {
  row: DraftCandidateRow;
  /** Read here when evidence sync is off; with sync on, the evidence is not final until the step has copied it. */
  evidence: ReadEvidence | null;
}

/**
 * The draft candidates in the order draft-next tries them, with those whose evidence is missing here set aside (and
 * listed). `upTo`: stop once that many are found, so a dry run, or a pump tick asking whether there is anything to
 * draft, reads the evidence of no candidate past the one it answers with.
 */
async function screenCandidates(deps: { store: Store; settings: PaperSettings }, force: boolean, upTo = DRAFT_NEXT_CANDIDATES, exclude: readonly string[] = []) {
  const rows = await listDraftCandidates(deps.store, { force, limit: DRAFT_NEXT_CANDIDATES });
  const screened: ScreenedCandidate[] = [];
  const skipped: SkippedCandidate[] = [];
  const passedBefore = new Set(exclude);
  for (const row of rows) {
    if (screened.length >= upTo) break;
    if (passedBefore.has(candidateRef(row).paper_id)) continue;
    const evidence = deps.settings.evidenceSync ? null : await readEvidence(deps.settings.projectRoot, row.project_dir, { secrets: deps.settings.secrets });
    // Evidence holding the service's secrets goes on to its paper step, which refuses it and holds the paper.
    if (evidence && !evidence.complete && evidence.secrets.length === 0) skipped.push({ ...candidateRef(row), reason: 'missing_evidence', detail: `evidence missing in ${evidence.project_path}`, missing: evidence.missing });
    else screened.push({ row, evidence });
  }
  return { screened, skipped, looked_at: rows.length };
}

/**
 * What a live draft-next tries next (the paper-draft-next workflow's step): up to `upTo` candidates, passing over those
 * in `exclude` (tried or skipped already).
 */
export async function selectDraftCandidates(deps: { store: Store; settings: PaperSettings }, force: boolean, upTo?: number, exclude?: readonly string[]): Promise<DraftCandidates> {
  const { screened, skipped, looked_at } = await screenCandidates(deps, force, upTo, exclude);
  return { candidates: screened.map(({ row }) => candidateRef(row)), skipped, looked_at };
}

/** The 424 of a step whose evidence is missing: what sync tried, what is still missing. */
function evidenceMissingError(result: Extract<PaperWorkflowResult, { outcome: 'evidence_missing' }>, syncEnabled: boolean): CommandRefusedError {
  return new CommandRefusedError(424, {
    message: `the evidence of '${result.paper_id}' is missing: ${result.missing.join('; ')}`,
    evidence_sync: {
      enabled: syncEnabled,
      ...(result.evidence_sync ?? {}),
      project_path: result.project_path,
      missing: result.missing,
    },
  });
}

type PaperView = Awaited<ReturnType<typeof paperWithChecklist>>;

/** A rewrite-draft's answer, which a retry with its idempotency key answers again. */
export interface RewriteAnswer {
  ok: true;
  paper_id: string;
  changed: true;
  result: PaperWorkflowResult;
  paper: PaperView | null;
}

/** A live rewrite-batch's answer, which a retry with its idempotency key answers again. */
export interface RewriteBatchAnswer {
  ok: true;
  dry_run: false;
  count: number;
  rewritten: number;
  results: PaperWorkflowResult[];
}

export function createPaperDrafting(deps: { store: Store; settings: PaperSettings; launcher: PaperLauncher }) {
  const { store, settings, launcher } = deps;
  const syncEnabled = settings.evidenceSync !== null;

  async function paperAnswer(paperId: string) {
    const paper = await getPaper(store, paperId);
    return paper ? paperWithChecklist(store, paper) : null;
  }

  /** The 409 of a step refused because the evidence holds the service's secrets: the files, never the values. */
  async function heldError(paperId: string, stage: 'draft' | 'rewrite', secrets: SecretFinding[]): Promise<CommandRefusedError> {
    return new CommandRefusedError(409, { message: secretFindingReason(stage, secrets), paper_id: paperId, secrets, paper: await paperAnswer(paperId) });
  }

  /**
   * A call whose workflow was canceled while it waited (by an operator, or with the workflow above it) answers 409 and
   * names the workflow: a canceled step gives its paper back, so the call may be made again.
   */
  function canceledError(command: string, error: unknown): unknown {
    if (!(error instanceof PaperWorkflowCanceledError)) return error;
    return new CommandRefusedError(409, {
      message: `the ${command} did not finish: ${error.message}; any paper it held is back where it was and may be drafted or rewritten again`,
      workflow_id: error.workflowId,
    });
  }

  /**
   * A canceled rewrite batch answers 409, and keeps that answer under its key: the batch's workflow is named by the
   * key and runs once, so only a new key runs the batch again.
   */
  async function batchCanceled(key: { scope: string; key: string }, error: PaperWorkflowCanceledError): Promise<CommandRefusedError> {
    const refusal = new CommandRefusedError(409, {
      message: `the rewrite batch did not finish: ${error.message}; any paper it held is back where it was, and a new idempotency_key runs the batch again`,
      workflow_id: error.workflowId,
    });
    const kept: KeptRefusal = { detail: refusal.detail };
    await completeKey(store, key.scope, key.key, { response: kept, status_code: 409 });
    return refusal;
  }

  /** Starts a step and waits for it; a key, when given, is noted as pending with the step's run id. */
  async function runStep(ref: { paper_id: string; project_id: string; run_id: string }, purpose: DraftPurpose, request: { requested_by: string; key: { scope: string; key: string } | null }) {
    const started = await launcher.startStep({ ...ref, purpose, requested_by: request.requested_by, request_key: request.key?.key ?? null });
    if (!started.started) return { started: false as const, reason: started.reason };
    if (request.key) await notePending(store, request.key.scope, request.key.key, { paper_id: ref.paper_id, workflow_run_id: started.workflow_run_id });
    return { started: true as const, result: await launcher.stepResult(ref.paper_id, started.workflow_run_id) };
  }

  /** `alreadyRead`: the candidate's evidence when draft-next has just read it, so a dry run reads it once. */
  async function dryRunDraft(candidate: DraftCandidateRow, skipped: SkippedCandidate[], alreadyRead: ReadEvidence | null) {
    const ref = candidateRef(candidate);
    const evidence = alreadyRead ?? (await readEvidence(settings.projectRoot, candidate.project_dir, { secrets: settings.secrets }));
    return {
      action: 'dry_run_draft' as const,
      ...ref,
      project_name: candidate.project_name,
      redraft: candidate.paper_status !== null && candidate.paper_status !== 'eligible',
      writer: settings.writer.provider,
      evidence: {
        complete: evidence.complete,
        project_path: evidence.project_path,
        found: evidence.found,
        missing: evidence.missing,
        secrets: evidence.secrets,
        sync: syncEnabled ? `copied from ${settings.evidenceSync!.ssh_host}:${settings.evidenceSync!.remote_root}/${candidate.project_dir} before a live draft` : 'off',
      },
      skipped,
    };
  }

  return {
    /**
     * Drafts the next paper: the writable run that finished first among those without a draft (with `force`, drafted
     * papers may be redrafted). Candidates whose evidence is missing are skipped and reported, never a 424.
     */
    async draftNext(request: DraftNextRequest) {
      if (request.dry_run) {
        const { screened, skipped, looked_at } = await screenCandidates(deps, request.force, 1);
        const first = screened[0];
        return first ? dryRunDraft(first.row, skipped, first.evidence) : { action: 'noop' as const, reason: draftNextNoopReason(looked_at, request.force), skipped };
      }
      // Nothing to draft starts no workflow: the answer is the same noop the workflow would give.
      const waiting = await screenCandidates(deps, request.force, 1);
      if (waiting.screened.length === 0) return { action: 'noop' as const, reason: draftNextNoopReason(waiting.looked_at, request.force), skipped: waiting.skipped };
      const outcome = await launcher.runDraftNext({ requested_by: request.requested_by, force: request.force, request_key: null }).catch((error: unknown) => {
        throw canceledError('draft-next', error);
      });
      if (outcome.action === 'noop') return outcome;
      const { action: _action, skipped, ...ref } = outcome;
      if (outcome.action === 'failed') {
        throw new CommandRefusedError(502, { message: `drafting '${ref.paper_id}' failed: ${outcome.error}`, paper_id: ref.paper_id, paper: await paperAnswer(ref.paper_id) });
      }
      if (outcome.action === 'held_for_review') throw await heldError(ref.paper_id, 'draft', outcome.secrets);
      return { action: 'drafted' as const, paper_id: ref.paper_id, project_id: ref.project_id, run_id: ref.run_id, result: outcome.result, paper: await paperAnswer(ref.paper_id), skipped };
    },

    /** Rewrites one paper's draft with the configured writer; replay-safe by idempotency key. */
    async rewriteDraft(paperId: string, request: RewriteRequest) {
      const paper = await getPaper(store, paperId);
      if (!paper) throw new CommandRefusedError(404, `paper '${paperId}' does not exist`);
      const key = { scope: 'paper-review.rewrite-draft', key: request.idempotency_key };
      const claim = await claimKey<{ paper_id: string; workflow_run_id: string }, RewriteAnswer>(store, { ...key, payload: { paper_id: paperId, requested_by: request.requested_by, force: request.force } });
      if (claim.state === 'done') return claim.response;
      let result: PaperWorkflowResult;
      if (claim.state === 'pending') {
        if (!claim.pending) throw new CommandRefusedError(409, `a request with idempotency key '${request.idempotency_key}' is still being carried out`);
        result = await launcher.stepResult(paperId, claim.pending.workflow_run_id).catch(async (error: unknown) => {
          if (error instanceof PaperWorkflowCanceledError) await releaseKey(store, key.scope, key.key);
          throw canceledError('rewrite', error);
        });
      } else {
        const refusal = rewriteRefusal(paper, request.force);
        if (refusal) {
          await releaseKey(store, key.scope, key.key);
          throw new CommandRefusedError(409, refusal);
        }
        const step = await runStep(paper, 'rewrite', { requested_by: request.requested_by, key }).catch(async (error: unknown) => {
          await releaseKey(store, key.scope, key.key);
          throw canceledError('rewrite', error);
        });
        if (!step.started) {
          await releaseKey(store, key.scope, key.key);
          throw new CommandRefusedError(409, step.reason);
        }
        result = step.result;
      }
      if (result.outcome !== 'drafted') {
        await releaseKey(store, key.scope, key.key);
        if (result.outcome === 'evidence_missing') throw evidenceMissingError(result, syncEnabled);
        if (result.outcome === 'refused') throw new CommandRefusedError(409, result.reason);
        if (result.outcome === 'held_for_review') throw await heldError(paperId, 'rewrite', result.secrets);
        throw new CommandRefusedError(502, { message: `rewriting '${paperId}' failed: ${result.error}`, paper_id: paperId, paper: await paperAnswer(paperId) });
      }
      const response: RewriteAnswer = { ok: true, paper_id: paperId, changed: true, result, paper: await paperAnswer(paperId) };
      await completeKey(store, key.scope, key.key, { response, status_code: 200 });
      return response;
    },

    /** Rewrites up to `limit` papers, highest rank first, as one batch workflow the call waits on. */
    async rewriteBatch(request: RewriteBatchRequest) {
      const selection = await selectRewrites(store, request);
      const selected = selection.map((paper) => ({ paper_id: paper.paper_id, project_id: paper.project_id, run_id: paper.run_id, paper_status: paper.paper_status, review_status: paper.review_status, rank_score: paper.rank_score, title: paper.title }));
      if (request.dry_run) return { ok: true as const, dry_run: true as const, selected, count: selected.length, limit: request.limit };
      const key = { scope: 'paper-review.rewrite-batch', key: request.idempotency_key };
      const { idempotency_key: _key, ...payload } = request;
      const claim = await claimKey<never, RewriteBatchAnswer | KeptRefusal>(store, { ...key, payload });
      if (claim.state === 'done') return replayAnswer(claim);
      // A pending claim is the same batch still running: the batch workflow is named by the key, so this finds it and
      // the selection passed here is not used.
      const papers = selected.map(({ paper_id, project_id, run_id }) => ({ paper_id, project_id, run_id }));
      const batch =
        claim.state === 'claimed' && papers.length === 0
          ? { results: [] }
          : await launcher.runRewriteBatch({ papers, requested_by: request.requested_by, request_key: request.idempotency_key }).catch(async (error: unknown) => {
              if (error instanceof PaperWorkflowCanceledError) throw await batchCanceled(key, error);
              if (claim.state === 'claimed') await releaseKey(store, key.scope, key.key);
              throw error;
            });
      const response: RewriteBatchAnswer = {
        ok: true,
        dry_run: false,
        count: batch.results.length,
        rewritten: batch.results.filter((result) => result.outcome === 'drafted').length,
        results: batch.results,
      };
      await completeKey(store, key.scope, key.key, { response, status_code: 200 });
      return response;
    },
  };
}

/** The papers a rewrite-batch rewrites, highest rank first; a research cycle's rewrite stage selects the same way. */
export function selectRewrites(store: Store, request: Omit<RewriteBatchRequest, 'idempotency_key' | 'requested_by' | 'dry_run'>): Promise<PaperRow[]> {
  return listRewriteSelection(store, {
    paper_status: request.paper_status,
    review_status: request.review_status,
    search: request.search,
    limit: request.limit,
    skip_rewritten: request.skip_rewritten,
    exclude_review_statuses: [...FINAL_REVIEW_STATUSES, ...(request.force ? [] : REVIEWS_UNDER_WAY)],
  });
}

/** Why a rewrite of this paper is refused now, or null. */
function rewriteRefusal(paper: PaperRow, force: boolean): string | null {
  const refused = paperActionRefusal('rewrite_draft', paper);
  if (refused) return refused;
  if (!force && REVIEWS_UNDER_WAY.includes(paper.review_status)) {
    return `the review of '${paper.paper_id}' is ${paper.review_status}: a person is reading this draft; send force to rewrite it anyway`;
  }
  return null;
}

export type PaperDrafting = ReturnType<typeof createPaperDrafting>;
