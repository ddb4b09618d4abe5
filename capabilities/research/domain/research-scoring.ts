/**
 * Score of a research candidate (0–100), with the breakdown that explains it.
 *
 *   weighted = 2.6·novelty + 1.7·feasibility + 2.5·accessibility + 2.2·falsifiability, rounded to 0.1
 *   score    = clamp(weighted + mode bonus, 0, 100), rounded to 0.1
 *   Fallbacks: accessibility missing → 5 when accessibility_delta is given, else 0;
 *              falsifiability missing → 6 when both success_threshold and kill_condition are given, else 0.
 *   ("Missing" means absent or not a finite number. A non-finite novelty or feasibility counts as 0. A value outside
 *   the schema's 0–10, from a caller that bypassed CandidateProposalSchema, is clamped into 0–10 first.)
 *   Mode bonus, computed on the effective dimensions (after fallback):
 *     moonshot                     +4 if falsifiability ≥ 7, else −8
 *     home_hardware_accessibility  +4 if accessibility ≥ 7, else −5
 *     followup_from_negative       +3 with a novelty_comparison, else −8
 *     fresh_grounded +2, implementation_gap +2, paper_replication_extension +1, manual_import 0
 *   Since every dimension is within 0–10 the score can reach at most 90 + 4 = 94: the clamp at 100 is a guard that
 *   no input reaches with these weights. The clamp at 0 is reachable (a −8 bonus on a weak candidate).
 */
import type { CandidateProposal, GenerationMode } from './research-candidate.ts';

/** Weights of the four dimensions (each 0–10). Their sum ×10 is 90, the highest weighted score. */
export const SCORE_WEIGHTS = Object.freeze({ novelty: 2.6, feasibility: 1.7, accessibility: 2.5, falsifiability: 2.2 });
/** Effective accessibility when it is missing but accessibility_delta is given. */
export const ACCESSIBILITY_FALLBACK = 5;
/** Effective falsifiability when it is missing but success_threshold and kill_condition are both given. */
export const FALSIFIABILITY_FALLBACK = 6;

export interface ScoreBreakdown {
  novelty: number;
  feasibility: number;
  /** Effective value (after fallback). */
  accessibility: number;
  /** Effective value (after fallback). */
  falsifiability: number;
  accessibility_fallback: boolean;
  falsifiability_fallback: boolean;
  /** Weighted sum of the four dimensions, rounded to 0.1. */
  weighted: number;
  mode_bonus: number;
  mode_bonus_reason: string;
  /** clamp(weighted + mode_bonus, 0, 100), rounded to 0.1. */
  score: number;
}

function round1(x: number): number {
  const r = Math.round(x * 10 + 1e-9) / 10;
  return r === 0 ? 0 : r; // no −0
}

/** A string with at least one non-blank character. */
export function present(s: string | null | undefined): s is string {
  return typeof s === 'string' && s.trim().length > 0;
}

/** A usable dimension value: finite, clamped into the schema's 0–10; null when absent or not finite. */
function dimensionOrNull(x: number | null | undefined): number | null {
  return typeof x === 'number' && Number.isFinite(x) ? Math.min(10, Math.max(0, x)) : null;
}

/** A list with at least one non-blank item. */
export function nonEmptyList(xs: readonly string[] | null | undefined): boolean {
  return Array.isArray(xs) && xs.some((x) => present(x));
}

function modeBonus(
  p: CandidateProposal,
  mode: GenerationMode,
  accessibility: number,
  falsifiability: number,
): { bonus: number; reason: string } {
  switch (mode) {
    case 'moonshot':
      return falsifiability >= 7
        ? { bonus: 4, reason: `moonshot: falsifiability ${falsifiability} ≥ 7 (+4)` }
        : { bonus: -8, reason: `moonshot: falsifiability ${falsifiability} < 7 (−8)` };
    case 'home_hardware_accessibility':
      return accessibility >= 7
        ? { bonus: 4, reason: `home_hardware_accessibility: accessibility ${accessibility} ≥ 7 (+4)` }
        : { bonus: -5, reason: `home_hardware_accessibility: accessibility ${accessibility} < 7 (−5)` };
    case 'followup_from_negative':
      return present(p.novelty_comparison)
        ? { bonus: 3, reason: 'followup_from_negative: novelty_comparison given (+3)' }
        : { bonus: -8, reason: 'followup_from_negative: no novelty_comparison (−8)' };
    case 'fresh_grounded':
      return { bonus: 2, reason: 'fresh_grounded (+2)' };
    case 'implementation_gap':
      return { bonus: 2, reason: 'implementation_gap (+2)' };
    case 'paper_replication_extension':
      return { bonus: 1, reason: 'paper_replication_extension (+1)' };
    case 'manual_import':
      return { bonus: 0, reason: 'manual_import (no bonus)' };
    default:
      return { bonus: 0, reason: `unknown generation_mode '${String(mode)}' (no bonus)` };
  }
}

export function scoreCandidate(p: CandidateProposal): ScoreBreakdown {
  const novelty = dimensionOrNull(p.novelty) ?? 0;
  const feasibility = dimensionOrNull(p.feasibility) ?? 0;
  const givenAccessibility = dimensionOrNull(p.accessibility);
  const givenFalsifiability = dimensionOrNull(p.falsifiability);
  const accessibility =
    givenAccessibility ?? (present(p.accessibility_delta) ? ACCESSIBILITY_FALLBACK : 0);
  const falsifiability =
    givenFalsifiability ??
    (present(p.success_threshold) && present(p.kill_condition) ? FALSIFIABILITY_FALLBACK : 0);
  const weighted = round1(
    SCORE_WEIGHTS.novelty * novelty +
      SCORE_WEIGHTS.feasibility * feasibility +
      SCORE_WEIGHTS.accessibility * accessibility +
      SCORE_WEIGHTS.falsifiability * falsifiability,
  );
  const { bonus, reason } = modeBonus(p, p.generation_mode, accessibility, falsifiability);
  const score = Math.min(100, Math.max(0, round1(weighted + bonus)));
  return {
    novelty,
    feasibility,
    accessibility,
    falsifiability,
    accessibility_fallback: givenAccessibility === null,
    falsifiability_fallback: givenFalsifiability === null,
    weighted,
    mode_bonus: bonus,
    mode_bonus_reason: reason,
    score,
  };
}
