/**
 * Which gate run a request is about: the unsettled run that occupies a project, the run a lifecycle event names, and
 * whether that run's agent may still post events.
 */
import { RUN_OVER_GATE_STATES, SETTLED_GATE_STATES } from '../contract/gate-names.ts';
import type { GateRun } from './gate-run.ts';

/** The run that still occupies `projectDir`, if any: a project takes one unsettled run at a time. */
export function activeRunIn(runs: readonly GateRun[], projectDir: string): GateRun | undefined {
  return runs.find((run) => run.project_dir === projectDir && !SETTLED_GATE_STATES.has(run.gate_state));
}

/** How a lifecycle event names its run; the agent runtime may know only its session or its project. */
export interface EventAddress {
  run_id?: string | undefined;
  session_id?: string | undefined;
  project_id?: string | undefined;
}

/**
 * Whether the run's agent may still post events with its own token: until the gate has sent the run's last word
 * (ready, finished, cancelled or failed). A pending question keeps the run open, since the agent goes on once answered.
 */
export const acceptsAgentEvents = (run: GateRun): boolean => !RUN_OVER_GATE_STATES.has(run.gate_state);

/**
 * The run an event is for: by run_id; else the newest run of that session; else the newest unsettled run of that
 * project.
 */
export function findRunForEvent(runs: readonly GateRun[], address: EventAddress): GateRun | undefined {
  if (address.run_id) return runs.find((run) => run.run_id === address.run_id);
  const newestFirst = [...runs].sort((a, b) => b.dispatched_at.localeCompare(a.dispatched_at));
  if (address.session_id) {
    const bySession = newestFirst.find((run) => run.session_id === address.session_id);
    if (bySession) return bySession;
  }
  if (address.project_id) return newestFirst.find((run) => run.project_id === address.project_id && !SETTLED_GATE_STATES.has(run.gate_state));
  return undefined;
}
