/**
 * Whether automation may start work now (`GET /control/api/v1/automation-readiness`, docs/console.md#read-models): every
 * criterion in a fixed order, READY only when all pass, else BLOCKED naming the first that fails. Pure.
 */

export const READINESS_CRITERIA = ['store', 'temporal', 'worker_freshness', 'pause_maintenance', 'conflicts', 'live_dispatch', 'attention_items', 'provider_budget'] as const;
export type ReadinessCriterion = (typeof READINESS_CRITERIA)[number];

export interface ReadinessInput {
  /** null when the store answered; else why not. Nothing else can be judged without it. */
  storeError: string | null;
  temporal: { ok: boolean; detail: string };
  /** One line per worker problem: none configured, never observed, stale, or failing its latest preflight. */
  workerProblems: readonly string[];
  queuePaused: boolean;
  maintenanceMode: boolean;
  /** Critical conflicts between the ledgers (an in-flight item without a run, two items on one lane, …). */
  criticalConflicts: readonly string[];
  liveDispatchEnabled: boolean;
  /** Queue items waiting for a person (the attention lane's queue part). */
  attentionItems: number;
  /** The research provider's budget; null when no provider is configured (generation stays off, nothing to judge). */
  providerBudget: { ok: boolean; reason: string } | null;
}

export interface CriterionResult {
  criterion: ReadinessCriterion;
  ok: boolean;
  /** Not judged, because the store could not be read. */
  checked: boolean;
  detail: string;
}

export interface Readiness {
  status: 'READY' | 'BLOCKED';
  first_failing: CriterionResult | null;
  criteria: CriterionResult[];
}

const joined = (lines: readonly string[]) => lines.join('; ');

function judge(criterion: ReadinessCriterion, input: ReadinessInput): { ok: boolean; detail: string } {
  switch (criterion) {
    case 'store':
      return input.storeError === null ? { ok: true, detail: 'the store answers' } : { ok: false, detail: `the store does not answer: ${input.storeError}` };
    case 'temporal':
      return input.temporal;
    case 'worker_freshness':
      return input.workerProblems.length === 0
        ? { ok: true, detail: 'every worker target passed a recent preflight' }
        : { ok: false, detail: joined(input.workerProblems) };
    case 'pause_maintenance':
      if (input.maintenanceMode) return { ok: false, detail: 'maintenance mode is on' };
      return input.queuePaused ? { ok: false, detail: 'the queue is paused' } : { ok: true, detail: 'neither paused nor in maintenance' };
    case 'conflicts':
      return input.criticalConflicts.length === 0 ? { ok: true, detail: 'no critical conflict' } : { ok: false, detail: joined(input.criticalConflicts) };
    case 'live_dispatch':
      return input.liveDispatchEnabled ? { ok: true, detail: 'live dispatch is enabled' } : { ok: false, detail: 'live dispatch is disabled (live_dispatch_enabled is false)' };
    case 'attention_items':
      return input.attentionItems === 0
        ? { ok: true, detail: 'no queue item waits for a person' }
        : { ok: false, detail: `${input.attentionItems} queue item(s) wait for a person (blocked, needs_review, dispatch_error or flagged)` };
    case 'provider_budget':
      if (input.providerBudget === null) return { ok: true, detail: 'no research provider is configured; provider generation stays off' };
      return input.providerBudget.ok ? { ok: true, detail: `provider budget ok: ${input.providerBudget.reason}` } : { ok: false, detail: input.providerBudget.reason };
  }
}

export function assessReadiness(input: ReadinessInput): Readiness {
  const criteria = READINESS_CRITERIA.map((criterion): CriterionResult => {
    if (criterion !== 'store' && input.storeError !== null) {
      return { criterion, ok: false, checked: false, detail: 'not judged: the store does not answer' };
    }
    return { criterion, checked: true, ...judge(criterion, input) };
  });
  const firstFailing = criteria.find((result) => !result.ok) ?? null;
  return { status: firstFailing ? 'BLOCKED' : 'READY', first_failing: firstFailing, criteria };
}
