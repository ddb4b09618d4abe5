/**
 * Whether the research provider may be asked for candidates now (docs/research.md#provider-backed-generation). Fail-closed:
 * anything but a readable quota with enough credit and enough requests left in its window blocks. Pure.
 */

export interface ProviderQuota {
  remaining_credits: number;
  window: { limit: number; remaining: number; resets_at: string };
}

export interface BudgetLimits {
  /** research_provider_min_remaining_credits */
  minRemainingCredits: number;
  /** research_provider_request_reserve: requests of the window that are never spent. */
  requestReserve: number;
}

export type QuotaReading = { ok: true; quota: ProviderQuota } | { ok: false; error: string };

export interface BudgetVerdict {
  ok: boolean;
  reason: string;
}

export function judgeBudget(reading: QuotaReading, limits: BudgetLimits, requestsToSpend: number): BudgetVerdict {
  if (!reading.ok) return { ok: false, reason: `the provider quota could not be read: ${reading.error}` };
  const { remaining_credits: credits, window } = reading.quota;
  if (credits < limits.minRemainingCredits) {
    return { ok: false, reason: `remaining credit ${credits} is below research_provider_min_remaining_credits (${limits.minRemainingCredits})` };
  }
  const needed = limits.requestReserve + requestsToSpend;
  if (window.remaining < needed) {
    return {
      ok: false,
      reason: `${window.remaining} request(s) left in the provider's window (resets ${window.resets_at}); ${needed} needed: research_provider_request_reserve (${limits.requestReserve}) + ${requestsToSpend} for this call`,
    };
  }
  return { ok: true, reason: `${credits} credit(s) and ${window.remaining} request(s) left; this call spends ${requestsToSpend}` };
}

export const PROVIDER_OUTCOMES = ['ok', 'rate_limited', 'timeout', 'server_error', 'http_error', 'malformed_output', 'unreachable'] as const;
export type ProviderOutcome = (typeof PROVIDER_OUTCOMES)[number];

/** How one generation request ended, as the provider_requests ledger keeps it. */
export interface ProviderRequestOutcome {
  outcome: ProviderOutcome;
  http_status: number | null;
  duration_ms: number;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  total_tokens: number | null;
  /** The cost the provider reported for the call (usage.cost), when it reports one. */
  cost: number | null;
  detail: string;
}
