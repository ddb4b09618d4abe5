import type { CycleStage } from './domain/cycle-policy.ts';
import type { CycleReport, CycleWorkflowInput } from '../../workflows/automation/cycle-messages.ts';

/** Where a cycle's workflow is: running with the stages it has finished, completed with its report, or ended otherwise. */
export type CycleProgress =
  | { status: 'running'; stages: CycleStage[] }
  | { status: 'completed'; report: CycleReport }
  | { status: 'failed' | 'canceled' | 'terminated' | 'timed_out'; reason: string };

/** Research-cycle workflows as the services see them; `capabilities/automation/cycle-workflows.ts` implements it on the Temporal client. */
export interface CycleLauncher {
  /** Starts `research-cycle:<cycle_id>`; a cycle started before under that id (running or not) is left as it is. */
  startCycle(input: CycleWorkflowInput): Promise<void>;
  /** Where the cycle is now; null when no cycle has that id. */
  cycleProgress(cycleId: string): Promise<CycleProgress | null>;
}

/** The cycle's workflow could not be started (Temporal not reachable, refused): nothing ran, the call may be sent again. */
export class CycleNotStartedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CycleNotStartedError';
  }
}
