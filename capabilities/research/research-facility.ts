import { randomUUID } from 'node:crypto';
import {
  dataCheckFailure,
  projectIdFor,
  type CandidateProposal,
  type SourceKind,
} from './domain/research-candidate.ts';
import { planBatch, PLANNER_VERSION, type PlannedCandidate } from './domain/research-planner.ts';
import { buildSmokeCandidates, SMOKE_BATCH_MAX, STARTER_SOURCES, type SmokeSource } from './domain/smoke-batch.ts';
import type { WorkloadClass } from '../../worker-gate/contract/workload.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { insertIdea } from './store/ideas.ts';
import { runIdempotent } from '../../platform/store/idempotency-keys.ts';
import { listKnownNegatives } from './store/known-negatives.ts';
import { getProject, insertProject } from '../runs/projects.ts';
import { getQueueItem, insertQueueItem } from '../runs/queue-items.ts';
import { insertAdmission } from './research-admissions.ts';
import {
  findDedupeMatches,
  getCandidate,
  insertCandidate,
  markCandidateQueueAdmitted,
} from './research-candidates.ts';
import { recordLineage, type LineageKind, type LineageLink } from './research-lineage.ts';
import { getSourcesByIds, insertSource, listSources } from './store/research-sources.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { isRunOwned } from '../runs/domain/queue-status.ts';
import { researchContractOf } from '../runs/domain/run-prompt.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';

/** The Research Facility's commands: plan and record candidates, build the smoke batch, promote into the queue. */

export interface SourceInput {
  source_id: string;
  kind: SourceKind;
  title: string;
  url?: string | undefined;
  summary?: string | undefined;
}

export interface ImportRequest {
  candidates: CandidateProposal[];
  sources: SourceInput[];
  dry_run: boolean;
  requested_by: string;
  idempotency_key?: string | undefined;
  batch_id?: string | undefined;
}

export interface CandidateResult {
  index: number;
  candidate_id: string | null;
  title: string;
  dedupe_key: string;
  generation_mode: string;
  decision: PlannedCandidate['decision'];
  score: number;
  breakdown: PlannedCandidate['breakdown'];
  reasons: string[];
  hard_failures: PlannedCandidate['hard_failures'];
  merged_into: string | null;
  /** False when a data-level check (rules 1 and 2) kept the candidate out of the candidate ledger. */
  stored: boolean;
}

export interface BatchResult {
  ok: true;
  dry_run: boolean;
  batch_id: string;
  planner_version: string;
  counts: Record<PlannedCandidate['decision'], number>;
  results: CandidateResult[];
  written: { sources: number; candidates: number; admissions: number; lineage: number };
}

export interface SmokeBatchRequest {
  dry_run: boolean;
  requested_by: string;
  count: number;
  idempotency_key?: string | undefined;
}

export interface PromoteRequest {
  candidate_id: string;
  dry_run: boolean;
  requested_by: string;
  idempotency_key?: string | undefined;
}

export interface ResearchFacilityOptions {
  defaultWorkloadClass: WorkloadClass;
  minAdmissionScore?: number;
}

const newId = (prefix: string) => `${prefix}-${randomUUID().replaceAll('-', '').slice(0, 16)}`;

function countDecisions(planned: readonly PlannedCandidate[]): BatchResult['counts'] {
  const counts: BatchResult['counts'] = { admitted: 0, rejected: 0, merged: 0, 'needs-review': 0 };
  for (const item of planned) counts[item.decision] += 1;
  return counts;
}

async function plan(q: Queryable, proposals: CandidateProposal[], minAdmissionScore: number | undefined): Promise<PlannedCandidate[]> {
  const [existing, knownNegatives] = await Promise.all([
    findDedupeMatches(q, [...new Set(proposals.map((p) => p.dedupe_key))]),
    listKnownNegatives(q),
  ]);
  return planBatch(proposals, { existing, knownNegatives, ...(minAdmissionScore === undefined ? {} : { minAdmissionScore }) });
}

export function createResearchFacility(store: Store, options: ResearchFacilityOptions) {
  /** Source ids a batch refers to must be stored already or come with the batch. */
  async function checkSourceReferences(q: Queryable, request: Pick<ImportRequest, 'candidates' | 'sources'>): Promise<void> {
    const supplied = new Set(request.sources.map((source) => source.source_id));
    const referenced = [...new Set(request.candidates.flatMap((c) => c.source_ids))].filter((id) => !supplied.has(id));
    if (referenced.length === 0) return;
    const stored = new Set((await getSourcesByIds(q, referenced)).map((source) => source.source_id));
    const problems = request.candidates.flatMap((candidate, index) =>
      candidate.source_ids
        .filter((id) => !supplied.has(id) && !stored.has(id))
        .map((id) => ({ loc: ['body', 'candidates', index, 'source_ids'], msg: `unknown source '${id}'`, type: 'unknown_source' })),
    );
    if (problems.length > 0) throw new CommandRefusedError(422, problems);
  }

  /** Writes one planned batch: candidates that pass the data-level checks, every admission, and their lineage. */
  async function recordBatch(tx: Queryable, batchId: string, planned: PlannedCandidate[], sources: SourceInput[], actor: string): Promise<BatchResult> {
    const written = { sources: 0, candidates: 0, admissions: 0, lineage: 0 };
    for (const source of sources) {
      if (await insertSource(tx, { ...source, url: source.url ?? null, summary: source.summary ?? null, metadata: { batch_id: batchId } })) written.sources += 1;
    }
    const link = async (from_kind: LineageKind, from_id: string, to_kind: LineageKind, to_id: string, relation: string) => {
      if (await recordLineage(tx, { from_kind, from_id, to_kind, to_id, relation })) written.lineage += 1;
    };
    const results: CandidateResult[] = [];
    for (const item of planned) {
      const proposal = item.proposal;
      const storable = dataCheckFailure(proposal) === null;
      const candidateId = storable ? newId('cand') : null;
      if (candidateId) {
        await insertCandidate(tx, {
          candidate_id: candidateId,
          batch_id: batchId,
          proposal,
          score: item.score,
          decision: item.decision,
          merged_into: item.merged_into,
          text_fingerprint: item.text_fingerprint,
        });
        written.candidates += 1;
        for (const sourceId of proposal.source_ids) await link('source', sourceId, 'candidate', candidateId, 'grounds');
        if (proposal.parent_project_id) await link('project', proposal.parent_project_id, 'followup_candidate', candidateId, 'followup');
        if (proposal.parent_run_id) await link('run', proposal.parent_run_id, 'followup_candidate', candidateId, 'followup');
        if (item.merged_into) await link('candidate', candidateId, 'candidate', item.merged_into, 'merged_into');
      }
      await insertAdmission(tx, {
        candidate_id: candidateId,
        batch_id: batchId,
        dedupe_key: proposal.dedupe_key,
        generation_mode: proposal.generation_mode,
        title: proposal.title,
        decision: item.decision,
        score: item.score,
        reasons: item.reasons,
        hard_failures: item.hard_failures,
        score_breakdown: item.breakdown ? { ...item.breakdown } : null,
        merged_into: item.merged_into,
        planner_version: PLANNER_VERSION,
        candidate_snapshot: proposal,
        decided_by: actor,
      });
      written.admissions += 1;
      await appendAuditEvent(tx, {
        entity_type: 'research_candidate',
        entity_id: candidateId ?? `${batchId}#${item.index}`,
        event_type: 'research.candidate_decided',
        payload: { batch_id: batchId, decision: item.decision, score: item.score, dedupe_key: proposal.dedupe_key, merged_into: item.merged_into },
        actor,
      });
      results.push(resultOf(item, candidateId));
    }
    await appendAuditEvent(tx, {
      entity_type: 'research_batch',
      entity_id: batchId,
      event_type: 'research.batch_recorded',
      payload: { counts: countDecisions(planned), written },
      actor,
    });
    return { ok: true, dry_run: false, batch_id: batchId, planner_version: PLANNER_VERSION, counts: countDecisions(planned), results, written };
  }

  function dryRunResult(batchId: string, planned: PlannedCandidate[]): BatchResult {
    return {
      ok: true,
      dry_run: true,
      batch_id: batchId,
      planner_version: PLANNER_VERSION,
      counts: countDecisions(planned),
      results: planned.map((item) => resultOf(item, null)),
      written: { sources: 0, candidates: 0, admissions: 0, lineage: 0 },
    };
  }

  /** Runs a live command in one transaction, once per idempotency key (a replay answers the first response). */
  async function live<T>(scope: string, key: string | undefined, payload: unknown, command: (tx: Queryable) => Promise<T>): Promise<T> {
    return store.transaction(async (tx) => {
      if (key === undefined) return command(tx);
      return (await runIdempotent(tx, { scope, key, payload }, () => command(tx))).response;
    });
  }

  /** Plans proposals whose source references are known to be stored, and records them, in the caller's transaction. */
  async function planAndRecord(tx: Queryable, batch: { batchId: string; proposals: CandidateProposal[]; sources: SourceInput[]; actor: string }): Promise<BatchResult> {
    const planned = await plan(tx, batch.proposals, options.minAdmissionScore);
    return recordBatch(tx, batch.batchId, planned, batch.sources, batch.actor);
  }

  /** The rows a promotion of `candidateId` writes, or why it is refused. */
  async function promotionPlan(q: Queryable, candidateId: string, forUpdate: boolean) {
    const candidate = await getCandidate(q, candidateId, { forUpdate });
    if (!candidate) throw new CommandRefusedError(404, `candidate '${candidateId}' does not exist`);
    if (candidate.decision !== 'admitted') {
      const why = candidate.admissions[0]?.reasons.join('; ') ?? '';
      throw new CommandRefusedError(409, `candidate '${candidate.candidate_id}' is ${candidate.decision}, not admitted${why ? `: ${why}` : ''}; only admitted candidates can be promoted`);
    }
    const projectId = projectIdFor(candidate.dedupe_key);
    const existingItem = await getQueueItem(q, projectId, { forUpdate });
    if (existingItem && isRunOwned(existingItem.status)) {
      throw new CommandRefusedError(409, `project '${projectId}' has a queue row in flight (${existingItem.status}); it is left untouched`);
    }
    if (existingItem || (await getProject(q, projectId))) {
      throw new CommandRefusedError(409, `candidate '${candidate.candidate_id}' was already promoted into project '${projectId}'${existingItem ? ` (queue status ${existingItem.status})` : ''}`);
    }
    const ideaId = `idea-${projectId}`;
    const workloadClass = candidate.workload_class ?? options.defaultWorkloadClass;
    return {
      candidate,
      idea: { idea_id: ideaId, candidate_id: candidate.candidate_id, title: candidate.title, hypothesis: candidate.hypothesis },
      project: {
        project_id: projectId,
        project_name: candidate.title,
        project_dir: projectId,
        idea_id: ideaId,
        candidate_id: candidate.candidate_id,
        workload_class: workloadClass,
        machine_target: candidate.machine_target,
      },
      queue_item: {
        project_id: projectId,
        project_name: candidate.title,
        status: 'queued' as const,
        machine_target: candidate.machine_target,
        workload_class: workloadClass,
        candidate_id: candidate.candidate_id,
        gpu_count: candidate.gpu_count,
        gpu_memory_mib: candidate.gpu_memory_mib,
        cpu_count: candidate.cpu_count,
      },
      lineage: [
        { from_kind: 'candidate', from_id: candidate.candidate_id, to_kind: 'idea', to_id: ideaId, relation: 'promoted_to' },
        { from_kind: 'idea', from_id: ideaId, to_kind: 'project', to_id: projectId, relation: 'realised_by' },
        { from_kind: 'project', from_id: projectId, to_kind: 'queue_item', to_id: projectId, relation: 'queued_as' },
      ] satisfies LineageLink[],
    };
  }

  const promotionAnswer = (rows: Awaited<ReturnType<typeof promotionPlan>>, dryRun: boolean) => ({
    ok: true as const,
    dry_run: dryRun,
    action: dryRun ? ('would_promote' as const) : ('promoted' as const),
    candidate_id: rows.candidate.candidate_id,
    project_id: rows.project.project_id,
    idea: rows.idea,
    project: rows.project,
    queue_item: rows.queue_item,
    lineage: rows.lineage,
  });

  /**
   * Promotes one admitted candidate inside the caller's transaction (rule 5: lineage before the runtime rows it
   * explains); refuses one that is not admitted, already promoted, or whose queue row is in flight.
   */
  async function promoteWithin(tx: Queryable, candidateId: string, actor: string, key: string) {
    const rows = await promotionPlan(tx, candidateId, true);
    for (const link of rows.lineage) await recordLineage(tx, link);
    await insertIdea(tx, rows.idea);
    await insertProject(tx, {
      ...rows.project,
      research_contract: researchContractOf(rows.candidate),
      expected_token_budget: rows.candidate.expected_token_budget,
    });
    await insertQueueItem(tx, rows.queue_item);
    await markCandidateQueueAdmitted(tx, rows.candidate.candidate_id);
    await appendAuditEvent(tx, {
      entity_type: 'research_candidate',
      entity_id: rows.candidate.candidate_id,
      event_type: 'research.candidate_promoted',
      payload: { project_id: rows.project.project_id, idea_id: rows.idea.idea_id },
      idempotency_key: key,
      actor,
    });
    return promotionAnswer(rows, false);
  }

  return {
    async importCandidates(request: ImportRequest): Promise<BatchResult> {
      const batchId = request.batch_id ?? newId('batch');
      const proposals = request.candidates;
      if (request.dry_run) {
        await checkSourceReferences(store, request);
        return dryRunResult(batchId, await plan(store, proposals, options.minAdmissionScore));
      }
      const { dry_run: _dryRun, idempotency_key: key, ...payload } = request;
      return live('research.import-candidates', key, payload, async (tx) => {
        await checkSourceReferences(tx, request);
        return planAndRecord(tx, { batchId, proposals, sources: request.sources, actor: request.requested_by });
      });
    },

    planAndRecord,

    async generateSmokeBatch(request: SmokeBatchRequest): Promise<BatchResult & { starter_sources: boolean; sources_used: string[] }> {
      const build = async (q: Queryable) => {
        const stored = await listSources(q, SMOKE_BATCH_MAX);
        const sources: SmokeSource[] = stored.length > 0 ? stored : [...STARTER_SOURCES];
        const proposals = buildSmokeCandidates(sources, request.count);
        return { starter: stored.length === 0, sources, proposals, planned: await plan(q, proposals, options.minAdmissionScore) };
      };
      const sourcesUsed = (proposals: CandidateProposal[]) => [...new Set(proposals.flatMap((p) => p.source_ids))];
      if (request.dry_run) {
        const built = await build(store);
        return { ...dryRunResult(newId('smoke'), built.planned), starter_sources: built.starter, sources_used: sourcesUsed(built.proposals) };
      }
      const { dry_run: _dryRun, idempotency_key: key, ...payload } = request;
      return live('research.generate-batch', key, payload, async (tx) => {
        const built = await build(tx);
        const newSources: SourceInput[] = built.starter
          ? built.sources.map((source) => ({ ...source, url: source.url ?? undefined, summary: source.summary ?? undefined }))
          : [];
        const result = await recordBatch(tx, newId('smoke'), built.planned, newSources, request.requested_by);
        return { ...result, starter_sources: built.starter, sources_used: sourcesUsed(built.proposals) };
      });
    },

    async promoteCandidate(request: PromoteRequest) {
      if (request.dry_run) return promotionAnswer(await promotionPlan(store, request.candidate_id, false), true);
      if (!request.idempotency_key) {
        throw new CommandRefusedError(422, [{ loc: ['body', 'idempotency_key'], msg: 'is required for a live promotion', type: 'missing' }]);
      }
      const { dry_run: _dryRun, idempotency_key: key, ...payload } = request;
      return live('research.promote-candidate', key, payload, (tx) => promoteWithin(tx, request.candidate_id, request.requested_by, key));
    },

    promoteWithin,
  };
}

function resultOf(item: PlannedCandidate, candidateId: string | null): CandidateResult {
  return {
    index: item.index,
    candidate_id: candidateId,
    title: item.proposal.title,
    dedupe_key: item.proposal.dedupe_key,
    generation_mode: item.proposal.generation_mode,
    decision: item.decision,
    score: item.score,
    breakdown: item.breakdown,
    reasons: item.reasons,
    hard_failures: item.hard_failures,
    merged_into: item.merged_into,
    stored: candidateId !== null,
  };
}

export type ResearchFacility = ReturnType<typeof createResearchFacility>;
