import { ADMISSION_DECISIONS, GENERATION_MODES, type AdmissionDecision, type GenerationMode } from './domain/research-candidate.ts';
import {
  admissionsByModeAndDecision,
  admissionScoreBuckets,
  promotedRunOutcomes,
  promotionCounts,
  rejectionReasons,
} from './store/research-quality-reads.ts';
import type { Queryable } from '../../platform/store/store.ts';

/** Most rejection reasons listed. */
export const REJECTION_REASON_LIMIT = 10;

const zeroDecisions = () => Object.fromEntries(ADMISSION_DECISIONS.map((decision) => [decision, 0])) as Record<AdmissionDecision, number>;
/** A share of a whole, rounded to 4 places; null when there is nothing to divide. */
const rate = (part: number, whole: number) => (whole === 0 ? null : Math.round((part / whole) * 10_000) / 10_000);

/** `GET /control/api/v1/research-quality` (docs/console.md#read-models). */
export async function readResearchQuality(q: Queryable) {
  const [byMode, buckets, reasons, promotion, outcomes] = await Promise.all([
    admissionsByModeAndDecision(q),
    admissionScoreBuckets(q),
    rejectionReasons(q, REJECTION_REASON_LIMIT),
    promotionCounts(q),
    promotedRunOutcomes(q),
  ]);
  const decisionsByMode = Object.fromEntries(GENERATION_MODES.map((mode) => [mode, zeroDecisions()])) as Record<GenerationMode, Record<AdmissionDecision, number>>;
  const totals = zeroDecisions();
  for (const row of byMode) {
    decisionsByMode[row.generation_mode][row.decision] += row.n;
    totals[row.decision] += row.n;
  }
  const decided = Object.values(totals).reduce((sum, n) => sum + n, 0);
  const distribution = Array.from({ length: 10 }, (_, bucket) => ({ from: bucket * 10, to: bucket * 10 + 10, total: 0, by_decision: zeroDecisions() }));
  for (const row of buckets) {
    const bucket = distribution[row.bucket]!;
    bucket.total += row.n;
    bucket.by_decision[row.decision] += row.n;
  }
  const positive = outcomes.filter((row) => row.decision === 'finalize_positive').reduce((sum, row) => sum + row.n, 0);
  const runs = outcomes.reduce((sum, row) => sum + row.n, 0);
  return {
    admissions: { total: decided, by_decision: totals, by_mode: decisionsByMode },
    score_distribution: distribution,
    rejection_reasons: reasons.map((row) => ({ reason: row.reason, count: row.n })),
    rates: {
      admission_rate: rate(totals.admitted, decided),
      merge_rate: rate(totals.merged, decided),
      promotion_rate: rate(promotion.promoted, promotion.admitted),
      promoted_run_positive_rate: rate(positive, runs),
    },
    promotion,
    promoted_run_outcomes: outcomes.map((row) => ({ state: row.state, decision: row.decision, count: row.n })),
  };
}
