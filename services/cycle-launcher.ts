import type { CycleReport, CycleWorkflowInput } from '../workflows/cycle-messages.ts';

/** Research-cycle workflows as the services see them; `clients/research-cycles.ts` implements it on the Temporal client. */
export interface CycleLauncher {
  /** Starts `research-cycle:<cycle_id>`, or finds it when it was started before, and waits for its report. */
  runCycle(input: CycleWorkflowInput): Promise<CycleReport>;
}

/** The cycle's workflow could not be started (Temporal not reachable, refused): nothing ran, the call may be sent again. */
export class CycleNotStartedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CycleNotStartedError';
  }
}
