import { buildFollowupCandidate, type FollowupParent } from './domain/followup-candidate.ts';
import { followupDedupeKey } from './domain/followup-candidate.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { nextFollowupParent } from './followup-parents.ts';
import { runIdempotent } from '../../platform/store/idempotency-keys.ts';
import type { Store } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import type { CandidateResult, ResearchFacility } from './research-facility.ts';

/**
 * `POST /control/api/v1/followups/launch-next` (docs/research.md#follow-ups): the next completed run that ended negative or
 * inconclusive without a paper gets one `followup_from_negative` candidate, planned like any other and, when
 * admitted, promoted into the queue, all in one transaction. A parent gets at most one follow-up: the run's row is
 * locked while its follow-up is written, and a run with a follow-up linked from it is never chosen again.
 */

export interface LaunchFollowupRequest {
  dry_run: boolean;
  requested_by: string;
  idempotency_key?: string | undefined;
}

export interface FollowupAnswer {
  ok: boolean;
  action: 'noop' | 'dry_run_followup' | 'followup_queued' | 'followup_recorded';
  dry_run: boolean;
  reason: string;
  parent_run: Omit<FollowupParent, 'contract'> | null;
  candidate: (CandidateResult & { hypothesis: string; mechanism: string; novelty_comparison: string }) | null;
  promotion: { project_id: string; queue_status: string } | null;
}

const SCOPE = 'followups.launch-next';

const parentView = ({ contract: _contract, ...parent }: FollowupParent) => parent;

export async function launchNextFollowup(deps: { store: Store; facility: ResearchFacility }, request: LaunchFollowupRequest): Promise<FollowupAnswer> {
  const { store, facility } = deps;
  const base = { dry_run: request.dry_run, parent_run: null, candidate: null, promotion: null };
  const noop: FollowupAnswer = { ok: true, action: 'noop', reason: 'no completed run with a negative or inconclusive decision and no paper is waiting for a follow-up', ...base };
  const candidateOf = (result: CandidateResult, proposal: ReturnType<typeof buildFollowupCandidate>) => ({
    ...result,
    hypothesis: proposal.hypothesis!,
    mechanism: proposal.mechanism!,
    novelty_comparison: proposal.novelty_comparison!,
  });

  if (request.dry_run) {
    const parent = await nextFollowupParent(store, { lock: false });
    if (!parent) return noop;
    const proposal = buildFollowupCandidate(parent);
    const planned = await facility.importCandidates({ candidates: [proposal], sources: [], dry_run: true, requested_by: request.requested_by });
    const result = planned.results[0]!;
    return {
      ok: true,
      action: 'dry_run_followup',
      dry_run: true,
      reason: `would plan a follow-up of run ${parent.run_id} (${result.decision}, score ${result.score})${result.decision === 'admitted' ? ' and queue it' : '; it would not be queued'}`,
      parent_run: parentView(parent),
      candidate: candidateOf(result, proposal),
      promotion: null,
    };
  }
  if (store.readOnly) throw new CommandRefusedError(501, 'the store is read-only (control_plane_store_backend is pg_readonly)');
  const key = request.idempotency_key;
  if (!key) throw new CommandRefusedError(422, [{ loc: ['body', 'idempotency_key'], msg: 'is required for a live follow-up launch', type: 'missing' }]);

  return store.transaction(async (tx) => {
    const { response } = await runIdempotent(tx, { scope: SCOPE, key, payload: { requested_by: request.requested_by } }, async (): Promise<FollowupAnswer> => {
      const parent = await nextFollowupParent(tx, { lock: true });
      if (!parent) return noop;
      const proposal = buildFollowupCandidate(parent);
      const batchId = `followup-${followupDedupeKey(parent.run_id).slice('followup:'.length)}`.slice(0, 200);
      const recorded = await facility.planAndRecord(tx, { batchId, proposals: [proposal], sources: [], actor: request.requested_by });
      const result = recorded.results[0]!;
      await appendAuditEvent(tx, {
        entity_type: 'run',
        entity_id: parent.run_id,
        event_type: 'research.followup_planned',
        payload: { candidate_id: result.candidate_id, decision: result.decision, score: result.score },
        idempotency_key: key,
        actor: request.requested_by,
      });
      const candidate = candidateOf(result, proposal);
      if (result.decision !== 'admitted' || !result.candidate_id) {
        return {
          ok: true,
          action: 'followup_recorded',
          dry_run: false,
          reason: `the follow-up of run ${parent.run_id} was recorded as ${result.decision} (score ${result.score}); it is not queued`,
          parent_run: parentView(parent),
          candidate,
          promotion: null,
        };
      }
      const promoted = await facility.promoteWithin(tx, result.candidate_id, request.requested_by, key);
      return {
        ok: true,
        action: 'followup_queued',
        dry_run: false,
        reason: `queued ${promoted.project_id}, the follow-up of run ${parent.run_id}`,
        parent_run: parentView(parent),
        candidate,
        promotion: { project_id: promoted.project_id, queue_status: promoted.queue_item.status },
      };
    });
    return response;
  });
}
