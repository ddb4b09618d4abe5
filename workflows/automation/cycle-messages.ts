import { defineQuery } from '@temporalio/workflow';
import type { CyclePolicy, CycleStage } from '../../capabilities/automation/domain/cycle-policy.ts';

/** Messages of the research-cycle workflow, shared by the workflow and its client. */

export const RESEARCH_CYCLE_WORKFLOW_TYPE = 'researchCycleWorkflow';

export interface CycleWorkflowInput {
  /** The run-cycle call's idempotency key: the cycle's business key. */
  cycle_id: string;
  requested_by: string;
  policy: CyclePolicy;
}

export interface CycleReport {
  ok: boolean;
  action: 'research_cycle' | 'research_cycle_blocked';
  dry_run: false;
  reason: string;
  run_cycle_id: string;
  workflow_id: string;
  stages: CycleStage[];
}

/** The stages finished so far, for a client (or the Temporal UI's query tab) watching a cycle. */
export const cycleStagesQuery = defineQuery<CycleStage[]>('cycleStages');
