import { z } from 'zod';
import { workerGateClient } from './worker-gate-client.ts';
import type { RunRow } from './run-ledger.ts';
import type { DispatchSettings } from './dispatch-settings.ts';

const GATE_TIMEOUT_MS = 10_000;

// The gate is another process, perhaps another version: its answer is read for these fields and nothing else.
const GateCancelSchema = z.object({
  already_cancelled: z.boolean().catch(false),
  stopped: z.array(z.object({ pid: z.number().int(), outcome: z.string() })).catch([]),
});

/** What the run's worker gate did with a cancel that came after the run had finished here. */
export interface GateStopOutcome {
  /** Whether the gate still tracked the run (false: it answered 404, or could not be asked). */
  tracked: boolean;
  /** The processes the gate still had for the run, and what became of each. */
  stopped: { pid: number; outcome: string }[];
  /** Why the gate was not asked, or did not answer; absent when it answered. */
  problem?: string;
}

/**
 * Asks the run's worker gate to stop what it still tracks of a run that has finished here: a run ends on the control
 * plane when the gate reports it (an error, a timeout) while its agent's processes may still be alive on the worker.
 * A gate that tracks nothing of the run answers 404, which is no failure.
 */
export async function stopOnGate(dispatch: DispatchSettings, run: Pick<RunRow, 'run_id' | 'lane'>): Promise<GateStopOutcome> {
  const target = dispatch.routing.lanes.get(run.lane);
  if (!target) return { tracked: false, stopped: [], problem: `the run's lane '${run.lane}' is not a configured worker target here` };
  let response;
  try {
    response = await workerGateClient(target, { timeoutMs: GATE_TIMEOUT_MS, trace: dispatch.trace }).cancelRun(run.run_id);
  } catch (error) {
    return { tracked: false, stopped: [], problem: `the worker gate did not answer: ${(error as Error).message}` };
  }
  if (response.status === 404) return { tracked: false, stopped: [] };
  if (response.status < 200 || response.status >= 300) return { tracked: false, stopped: [], problem: `the worker gate answered ${response.status}` };
  const answer = GateCancelSchema.safeParse(response.body);
  return { tracked: true, stopped: answer.success ? answer.data.stopped.map(({ pid, outcome }) => ({ pid, outcome })) : [] };
}
