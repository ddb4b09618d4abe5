/**
 * A bounded research cycle (docs/automation.md#research-cycles): its policy, the order of its stages, and when it stops before
 * doing anything. Pure; shared by the run-cycle route, its dry run and the workflow.
 */

export interface CyclePolicy {
  enabled: boolean;
  max_provider_requests_per_run: number;
  max_promotions_per_run: number;
  max_dispatches_per_run: number;
  wait_for_completion: boolean;
  max_paper_drafts_per_run: number;
  max_publication_rewrites_per_run: number;
  min_admission_score: number;
  require_budget_ok: boolean;
  stop_if_queue_active: boolean;
  stop_if_dashboard_attention: boolean;
}

export const CYCLE_POLICY_DEFAULTS: CyclePolicy = {
  enabled: false,
  max_provider_requests_per_run: 1,
  max_promotions_per_run: 1,
  max_dispatches_per_run: 0,
  wait_for_completion: false,
  max_paper_drafts_per_run: 0,
  max_publication_rewrites_per_run: 0,
  min_admission_score: 72,
  require_budget_ok: true,
  stop_if_queue_active: true,
  stop_if_dashboard_attention: true,
};

/** A cycle spends, promotes, dispatches, drafts and rewrites at most one of each. */
export const CYCLE_STEP_MAX = 1;

export const CYCLE_STAGES = ['stop_conditions', 'provider_batch', 'promote', 'dispatch', 'paper_draft', 'publication_rewrite'] as const;
export type CycleStageName = (typeof CYCLE_STAGES)[number];

/** One stage of a cycle's report: what it did (or would do), and why. */
export interface CycleStage {
  name: CycleStageName;
  action: string;
  reason: string;
  [detail: string]: unknown;
}

export interface CycleFacts {
  activeItems: number;
  attentionItems: number;
  /** Null when the budget was not asked (the policy spends no provider request or does not require it). */
  budget: { ok: boolean; reason: string } | null;
}

/** Whether the budget is a stop condition of this policy. */
export const budgetMatters = (policy: CyclePolicy): boolean => policy.require_budget_ok && policy.max_provider_requests_per_run > 0;

/** The first stop condition that holds, in the policy table's order, or null. */
export function cycleStop(policy: CyclePolicy, facts: CycleFacts): { condition: string; reason: string } | null {
  if (policy.stop_if_queue_active && facts.activeItems > 0) {
    return { condition: 'stop_if_queue_active', reason: `${facts.activeItems} queue item(s) are active` };
  }
  if (policy.stop_if_dashboard_attention && facts.attentionItems > 0) {
    return { condition: 'stop_if_dashboard_attention', reason: `${facts.attentionItems} queue item(s) wait for a person` };
  }
  if (budgetMatters(policy) && facts.budget && !facts.budget.ok) {
    return { condition: 'require_budget_ok', reason: `the provider budget is not ok: ${facts.budget.reason}` };
  }
  return null;
}

/** A stage the policy leaves out. */
export const skippedStage = (name: CycleStageName, field: keyof CyclePolicy): CycleStage => ({ name, action: 'skipped', reason: `${field} is 0` });

/** The workflow ID of a cycle: its idempotency key is its business key. */
export const cycleWorkflowId = (idempotencyKey: string): string => `research-cycle:${idempotencyKey}`;
