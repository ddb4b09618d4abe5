import { CommandRefusedError } from '../../platform/command-errors.ts';
import type { AgentSettings, RunWorkflowInput } from '../../workflows/runs/run-messages.ts';
import type { dispatchRouteOf } from './domain/worker-lanes.ts';
import type { PreflightResult } from './domain/preflight-checks.ts';
import type { QueueItemRow } from './queue-items.ts';
import type { StartedRun } from './run-launcher.ts';
import type { PlacedCandidate } from './run-placements.ts';

/**
 * What a dispatch-next call answers: its action and reason, the candidate it chose and its route, and, once a run has
 * started, the worker's answer to it or the refusal an HTTP caller gets for it.
 */

/** What a dispatch-next call did: dispatched (or would have), or why not. */
export const DISPATCH_ACTIONS = ['dry_run_dispatch', 'live_dispatch', 'dispatch_blocked', 'paused', 'noop'] as const;
export type DispatchAction = (typeof DISPATCH_ACTIONS)[number];

/** What an action carries besides its reason: the candidate, its route and run, and the gate's answers. */
interface DispatchAnswerParts {
  candidate?: CandidateView | null;
  dispatch_route?: ReturnType<typeof dispatchRouteOf> | null;
  /** A dry run's: where on the worker the run would go. */
  placement?: ReturnType<typeof placementView>;
  run_id?: string;
  workflow_id?: string;
  agent?: AgentSettings;
  preflight?: PreflightResult;
  prepare?: Record<string, unknown>;
  dispatch?: Record<string, unknown>;
}

/** A dispatch-next answer: the action and its reason, with what the action carries. */
export interface DispatchAnswer extends DispatchAnswerParts {
  ok: boolean;
  action: DispatchAction;
  reason: string;
  dry_run: boolean;
  live_dispatch_enabled: boolean;
  active_count: number;
}

export type AnswerWith = (action: DispatchAction, reason: string, parts?: DispatchAnswerParts) => DispatchAnswer;

/** What a live call has decided once it has a run to start: noted under its idempotency key before the start. */
export interface ChosenRun {
  run: RunWorkflowInput;
  candidate: CandidateView;
  dispatch_route: ReturnType<typeof dispatchRouteOf>;
}

/** Where the run goes on its worker and why (docs/runs.md#slots-and-gpus): what a dispatch answer shows of its placement. */
export const placementView = (placement: PlacedCandidate['placement']) => ({
  needs: placement.needs,
  gpu_indices: placement.gpu_indices,
  cpu_count: placement.cpu_count,
  reason: placement.reason,
});

export type CandidateView = ReturnType<typeof candidateView>;
export const candidateView = (item: QueueItemRow) => ({
  project_id: item.project_id,
  project_name: item.project_name,
  status: item.status,
  dispatch_priority: item.dispatch_priority,
  selection_rank: item.selection_rank,
  machine_target: item.machine_target,
  workload_class: item.workload_class,
  dispatch_failures: item.dispatch_failures,
  gpu_count: item.gpu_count,
  gpu_memory_mib: item.gpu_memory_mib,
  cpu_count: item.cpu_count,
  updated_at: item.updated_at,
});

/** The answer to a run's start: its dispatch outcome, or the refusal an HTTP caller gets for it. */
export function answerStarted(answer: AnswerWith, chosen: ChosenRun, started: StartedRun): DispatchAnswer {
  const { run, candidate, dispatch_route } = chosen;
  if (!started.started) return answer('dispatch_blocked', `claim lost: ${started.reason}`, { candidate, dispatch_route });
  const outcome = started.outcome;
  const ids = { run_id: run.run_id, workflow_id: started.workflow_id };
  if (outcome === null) {
    throw new CommandRefusedError(504, { message: 'the run workflow did not report the worker\'s answer in time; it goes on, follow it by run_id', ...ids });
  }
  switch (outcome.action) {
    case 'live_dispatch':
      return answer('live_dispatch', `dispatched ${candidate.project_id} to ${dispatch_route.machine_target}`, {
        ...ids,
        candidate,
        dispatch_route,
        agent: run.agent,
        prepare: outcome.prepare,
        dispatch: outcome.dispatch,
      });
    case 'dispatch_blocked':
      return answer('dispatch_blocked', outcome.reason, { ...ids, candidate, dispatch_route, ...(outcome.preflight ? { preflight: outcome.preflight } : {}) });
    case 'dispatch_failed':
      throw new CommandRefusedError(502, {
        message: `${outcome.stage} failed: ${outcome.reason}`,
        stage: outcome.stage,
        status: outcome.status,
        queue_status: outcome.queue_status,
        ...ids,
      });
    case 'canceled':
      throw new CommandRefusedError(409, { message: outcome.reason, ...ids });
  }
}
