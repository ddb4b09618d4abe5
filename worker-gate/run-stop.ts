import type { GateRun, ReapedProcess } from './domain/gate-run.ts';
import { readCmdline, readProcessTable } from './process-table.ts';
import { findTrackedProcesses, trackingTargetOf } from './process-tracking.ts';
import { reapProcesses } from './stale-reaper.ts';

/**
 * Stops every process the gate tracks for a run (SIGTERM, then SIGKILL after `termGraceSec`), never the gate itself or
 * its parent; answers what happened to each, with its command line, as the run's record keeps it.
 */
export async function stopRunProcesses(run: GateRun, termGraceSec: number, why: string): Promise<ReapedProcess[]> {
  const tracked = findTrackedProcesses(readProcessTable({ withCwd: true }), trackingTargetOf(run));
  const victims = tracked.alive.filter((proc) => proc.pid !== process.pid && proc.pid !== process.ppid);
  const commands = new Map(victims.map((proc) => [proc.pid, (readCmdline(proc.pid) ?? [proc.comm]).join(' ').slice(0, 300)]));
  const outcomes = await reapProcesses(victims, { termGraceSec });
  const at = new Date().toISOString();
  return outcomes.map((outcome) => ({ pid: outcome.pid, outcome: outcome.outcome, at, command: commands.get(outcome.pid) || why }));
}
