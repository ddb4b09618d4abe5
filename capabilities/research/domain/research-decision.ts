/**
 * Decisions of the research planner: hard failures, admission thresholds and the batch plan
 * (docs/research.md#research-facility-intake).
 *
 * HARD FAILURES (each one a { code, message } naming the field or rule)
 *   missing_contract_field      one per missing field of the core contract: hypothesis, mechanism, baseline_to_beat,
 *                               success_threshold, kill_condition, estimated_runtime_class, expected_artifacts
 *                               (at least one non-blank item)
 *   missing_source_grounding    fresh_grounded (rule 1) or paper_replication_extension without any source_ids or
 *                               source_urls
 *   missing_parent_lineage      followup_from_negative without parent_project_id or parent_run_id (rule 2)
 *   missing_novelty_comparison  similar_prior_projects not empty but no novelty_comparison
 *   shallow_increment           the hypothesis or the mechanism is only a tweak of SHALLOW_INCREMENT_PATTERNS
 *                               (see the heuristic there)
 *   known_negative_rerun        dedupe_key equal to a known negative's, or text near-identical to one, and neither
 *                               a mechanism different from that negative's (compared normalized; a negative that
 *                               recorded no mechanism cannot be shown to differ) nor a novelty_comparison
 *
 * DECISION, per candidate, first rule that applies:
 *   1. any hard failure                                                   → rejected
 *   2. its dedupe_key already appeared EARLIER in this batch (rule 4)     → rejected (the first occurrence is judged
 *                                                                           normally, whatever its own decision)
 *   3. same dedupe_key as an existing candidate, else near-identical text → merged, merged_into = that candidate_id
 *      (dedupe_key matches win over text matches; among several, the smallest candidate_id, so the order of
 *      `existing` does not matter). Only admitted / needs-review candidates are passed in as `existing`.
 *   4. score ≥ minAdmissionScore (default 72)                             → admitted
 *   5. score ≥ 58                                                         → needs-review
 *   6. otherwise                                                          → rejected
 */
import type { AdmissionDecision, CandidateProposal } from './research-candidate.ts';
import { isNearIdentical, normalizeText, textFingerprint } from './research-similarity.ts';
import { nonEmptyList, present, scoreCandidate, type ScoreBreakdown } from './research-scoring.ts';
import { shallowFinding } from './shallow-increment.ts';

export const DEFAULT_MIN_ADMISSION_SCORE = 72;
export const NEEDS_REVIEW_MIN_SCORE = 58;

export interface ExistingCandidateRef {
  candidate_id: string;
  dedupe_key: string;
  hypothesis: string | null;
  mechanism: string | null;
}

/** A prior negative or mixed outcome; `reference` names the project or run. */
export interface KnownNegative {
  dedupe_key: string;
  hypothesis: string | null;
  mechanism: string | null;
  reference: string;
}

export interface PlannerContext {
  /** Admitted / needs-review candidates only: a rejected one never blocks a resubmission. */
  existing: readonly ExistingCandidateRef[];
  knownNegatives: readonly KnownNegative[];
  /** Default DEFAULT_MIN_ADMISSION_SCORE; must be a finite number within 0–100. */
  minAdmissionScore?: number;
}

export const HARD_FAILURE_CODES = [
  'missing_contract_field',
  'missing_source_grounding',
  'missing_parent_lineage',
  'missing_novelty_comparison',
  'shallow_increment',
  'known_negative_rerun',
] as const;
export type HardFailureCode = (typeof HARD_FAILURE_CODES)[number];

export interface HardFailure {
  code: HardFailureCode;
  message: string;
}

export interface PlannedCandidate {
  /** Position in the input batch, from 0. */
  index: number;
  proposal: CandidateProposal;
  decision: AdmissionDecision;
  score: number;
  breakdown: ScoreBreakdown;
  hard_failures: HardFailure[];
  reasons: string[];
  merged_into: string | null;
  text_fingerprint: string;
}

function fmt(x: number): string {
  return x.toFixed(1);
}

const CONTRACT_TEXT_FIELDS = [
  ['hypothesis', 'the claim the experiment tests'],
  ['mechanism', 'why the change should work'],
  ['baseline_to_beat', 'what the result must beat'],
  ['success_threshold', 'what counts as success'],
  ['kill_condition', 'when to stop and call the result negative'],
] as const;

function quote(s: string, max = 80): string {
  return `"${s.length > max ? `${s.slice(0, max - 1)}…` : s}"`;
}

export function hardFailures(p: CandidateProposal, knownNegatives: readonly KnownNegative[]): HardFailure[] {
  const out: HardFailure[] = [];
  const fail = (code: HardFailureCode, message: string) => out.push({ code, message });

  for (const [field, meaning] of CONTRACT_TEXT_FIELDS) {
    if (!present(p[field])) fail('missing_contract_field', `missing core contract field '${field}' (${meaning})`);
  }
  if (!present(p.estimated_runtime_class)) {
    fail('missing_contract_field', "missing core contract field 'estimated_runtime_class' (how long it runs)");
  }
  if (!nonEmptyList(p.expected_artifacts)) {
    fail('missing_contract_field', "missing core contract field 'expected_artifacts' (at least one expected artifact)");
  }

  const hasSource = nonEmptyList(p.source_ids) || nonEmptyList(p.source_urls);
  if (p.generation_mode === 'fresh_grounded' && !hasSource) {
    fail(
      'missing_source_grounding',
      'fresh_grounded candidate has no source evidence: source_ids and source_urls are empty (rule 1 requires at least one source reference)',
    );
  }
  if (p.generation_mode === 'paper_replication_extension' && !hasSource) {
    fail(
      'missing_source_grounding',
      'paper_replication_extension candidate has no paper/source lineage: source_ids and source_urls are empty',
    );
  }
  if (p.generation_mode === 'followup_from_negative' && !present(p.parent_project_id) && !present(p.parent_run_id)) {
    fail(
      'missing_parent_lineage',
      'followup_from_negative candidate has no parent lineage: parent_project_id and parent_run_id are both missing (rule 2)',
    );
  }
  const similar = (p.similar_prior_projects ?? []).filter((s) => present(s));
  if (similar.length > 0 && !present(p.novelty_comparison)) {
    fail(
      'missing_novelty_comparison',
      `similar_prior_projects lists ${similar.length} project(s) (${similar.join(', ')}) but novelty_comparison is missing`,
    );
  }

  for (const field of ['hypothesis', 'mechanism'] as const) {
    const finding = shallowFinding(p[field]);
    if (finding) {
      fail(
        'shallow_increment',
        `shallow increment: the ${field} ${finding.labels.join('; ')} (${finding.phrases.map((x) => quote(x)).join(', ')}) ` +
          'and states no other substantive change',
      );
    }
  }

  const mechanism = normalizeText(p.mechanism);
  const explained = present(p.novelty_comparison);
  for (const neg of knownNegatives) {
    const sameKey = neg.dedupe_key === p.dedupe_key;
    if (!sameKey && !isNearIdentical(p, neg)) continue;
    if (explained) continue;
    const negMechanism = normalizeText(neg.mechanism);
    if (negMechanism !== '' && mechanism !== '' && negMechanism !== mechanism) continue;
    const match = sameKey ? `same dedupe_key '${p.dedupe_key}'` : 'near-identical hypothesis and mechanism';
    const why =
      negMechanism === ''
        ? 'the negative recorded no mechanism, so a new one cannot be shown, and there is no novelty_comparison'
        : mechanism === ''
          ? 'there is no mechanism and no novelty_comparison'
          : 'the mechanism is the same and there is no novelty_comparison';
    fail('known_negative_rerun', `re-runs known negative ${neg.reference} (${match}): ${why} explaining what is new`);
  }
  return out;
}

function byCandidateId(a: ExistingCandidateRef, b: ExistingCandidateRef): number {
  return a.candidate_id < b.candidate_id ? -1 : a.candidate_id > b.candidate_id ? 1 : 0;
}

export function planBatch(proposals: readonly CandidateProposal[], context: PlannerContext): PlannedCandidate[] {
  const minAdmission = context.minAdmissionScore ?? DEFAULT_MIN_ADMISSION_SCORE;
  if (!Number.isFinite(minAdmission) || minAdmission < 0 || minAdmission > 100) {
    throw new RangeError(`minAdmissionScore must be a finite number within 0–100, got ${String(minAdmission)}`);
  }
  const existing = [...context.existing].sort(byCandidateId);
  const firstIndexByKey = new Map<string, number>();
  const planned: PlannedCandidate[] = [];

  proposals.forEach((proposal, index) => {
    const breakdown = scoreCandidate(proposal);
    const score = breakdown.score;
    const failures = hardFailures(proposal, context.knownNegatives);
    const reasons: string[] = [];
    let decision: AdmissionDecision;
    let mergedInto: string | null = null;

    const earlier = firstIndexByKey.get(proposal.dedupe_key);
    if (earlier === undefined) firstIndexByKey.set(proposal.dedupe_key, index);

    if (failures.length > 0) {
      decision = 'rejected';
      reasons.push(...failures.map((f) => f.message));
      reasons.push(
        `rejected: ${failures.length} hard failure${failures.length === 1 ? '' : 's'} (score ${fmt(score)} not considered)`,
      );
    } else if (earlier !== undefined) {
      decision = 'rejected';
      reasons.push(
        `duplicate dedupe_key '${proposal.dedupe_key}' earlier in this batch (candidate ${earlier}): rejected (rule 4)`,
      );
    } else {
      const byKey = existing.find((e) => e.dedupe_key === proposal.dedupe_key);
      const byText = byKey ? undefined : existing.find((e) => isNearIdentical(proposal, e));
      const target = byKey ?? byText;
      if (target) {
        decision = 'merged';
        mergedInto = target.candidate_id;
        reasons.push(
          byKey
            ? `merged into ${target.candidate_id}: same dedupe_key '${proposal.dedupe_key}'`
            : `merged into ${target.candidate_id}: near-identical hypothesis and mechanism`,
        );
      } else {
        const composition = `score ${fmt(score)} = weighted ${fmt(breakdown.weighted)} + mode bonus ${breakdown.mode_bonus} (${breakdown.mode_bonus_reason})`;
        reasons.push(composition);
        if (score >= minAdmission) {
          decision = 'admitted';
          reasons.push(`score ${fmt(score)} ≥ ${minAdmission}: admitted`);
        } else if (score >= NEEDS_REVIEW_MIN_SCORE) {
          decision = 'needs-review';
          reasons.push(`score ${fmt(score)} < ${minAdmission} and ≥ ${NEEDS_REVIEW_MIN_SCORE}: needs-review`);
        } else {
          decision = 'rejected';
          reasons.push(`score ${fmt(score)} < ${Math.min(minAdmission, NEEDS_REVIEW_MIN_SCORE)}: rejected`);
        }
      }
    }

    planned.push({
      index,
      proposal,
      decision,
      score,
      breakdown,
      hard_failures: failures,
      reasons,
      merged_into: mergedInto,
      text_fingerprint: textFingerprint(proposal),
    });
  });
  return planned;
}
