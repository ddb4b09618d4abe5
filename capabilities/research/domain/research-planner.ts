/**
 * Deterministic planner of the Research Facility (docs/research.md#research-facility-intake).
 *
 * It scores candidate proposals, finds hard failures and decides admitted / rejected / merged / needs-review for
 * every candidate of a batch, with readable reasons. Pure: no I/O, no clock, no randomness; the same input always
 * gives the same output, and nothing depends on the key order of an object.
 *
 * The rules live in four modules, each documenting its part:
 *   research-similarity.ts  normalized text, fingerprints, near-identical texts
 *   shallow-increment.ts    the grammar of shallow increments (a tweak of a known knob and nothing else)
 *   research-scoring.ts     the 0–100 score and its breakdown
 *   research-decision.ts    hard failures, admission thresholds and planBatch
 */
export const PLANNER_VERSION = 'planner.v1';

export {
  DEFAULT_MIN_ADMISSION_SCORE,
  NEEDS_REVIEW_MIN_SCORE,
  hardFailures,
  planBatch,
  type ExistingCandidateRef,
  type HardFailure,
  type HardFailureCode,
  type KnownNegative,
  type PlannedCandidate,
  type PlannerContext,
} from './research-decision.ts';
export {
  ACCESSIBILITY_FALLBACK,
  FALSIFIABILITY_FALLBACK,
  SCORE_WEIGHTS,
  scoreCandidate,
  type ScoreBreakdown,
} from './research-scoring.ts';
export {
  NEAR_IDENTICAL_JACCARD,
  NEAR_IDENTICAL_MIN_TOKENS,
  isNearIdentical,
  normalizeText,
  textFingerprint,
} from './research-similarity.ts';
export {
  SHALLOW_INCREMENT_PATTERNS,
  SHALLOW_RESIDUAL_MAX_TOKENS,
  type ShallowIncrementPattern,
} from './shallow-increment.ts';
