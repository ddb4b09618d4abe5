import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { DispatchSettings } from '../../capabilities/runs/dispatch-settings.ts';
import type { WorkerTarget } from '../../capabilities/runs/domain/worker-lanes.ts';
import type { PreflightResult } from '../../capabilities/runs/domain/preflight-checks.ts';
import { buildRunPrompt, promptFileFor } from '../../capabilities/runs/domain/run-prompt.ts';
import { getProject, getProjectRunBrief, type ProjectRunBrief } from '../../capabilities/runs/projects.ts';
import { applyRunTransition, getRun, LaneBusyError, UnknownRunError, type RunRow, type TransitionRequest } from '../../capabilities/runs/run-ledger.ts';
import { StoreReadOnlyError, type Store } from '../../platform/store/store.ts';
import type { AgentSettings } from '../../workflows/runs/run-messages.ts';
import type { AllowedTool } from '../../worker-gate/contract/agent-question.ts';
import { dispatchPreflight } from '../../capabilities/runs/worker-preflight.ts';
import { WorkerGateError, workerGateClient } from '../../capabilities/runs/worker-gate-client.ts';
import { heartbeating } from '../heartbeat.ts';
import { claimPlaced } from '../../capabilities/runs/run-placements.ts';
import { GpuTakenError } from '../../capabilities/runs/store/gpu-placements.ts';
import { retakeLane, type LaneRetake } from '../../capabilities/runs/lane-retake.ts';
import { GATE_CALL_FAILED, GATE_UNAVAILABLE, isRejectedWrite, UNKNOWN_LANE, PERMANENT_FAILURE_TYPES, type GateFailureDetails } from '../../capabilities/runs/domain/run-failures.ts';

/**
 * Activities of the run workflow. Each is idempotent by business key: the claim by run_id, transitions by
 * (run_id, transition), and the gate's prepare/dispatch by run_id on the gate itself. Tokens are looked up here by
 * lane, so they never enter workflow history.
 */

export interface RunActivityDeps {
  store: Store;
  settings: DispatchSettings;
}

export interface ClaimRunInput {
  run_id: string;
  workflow_id: string;
  project_id: string;
  lane: string;
  requested_by: string;
}

export interface GateCallInput {
  run_id: string;
  timeout_sec: number;
}

export interface TransitionOutcome {
  applied: boolean;
  reason?: string;
  run_state: string | null;
  queue_status: string | null;
}

/** A failed gate call, with the gate's status as details the workflow reads back (capabilities/runs/domain/run-failures.ts). */
function gateFailure(error: unknown): unknown {
  // The activity's own cancellation ends it as cancelled, not as a failed gate call.
  if (Context.current().cancellationSignal.aborted) return error;
  if (error instanceof WorkerGateError) {
    return ApplicationFailure.create({
      message: error.message,
      type: error.retryable ? GATE_UNAVAILABLE : PERMANENT_FAILURE_TYPES.gateRefused,
      nonRetryable: !error.retryable,
      details: [{ status: error.status } satisfies GateFailureDetails],
    });
  }
  return ApplicationFailure.create({ message: (error as Error).message, type: GATE_CALL_FAILED, details: [{ status: null } satisfies GateFailureDetails] });
}

/** A failed ledger write: one that can never succeed is not retried; anything else (a lost connection) is. */
function ledgerFailure(error: unknown): unknown {
  if (error instanceof StoreReadOnlyError) return ApplicationFailure.nonRetryable(error.message, PERMANENT_FAILURE_TYPES.storeReadOnly);
  if (isRejectedWrite((error as { code?: unknown }).code)) {
    return ApplicationFailure.nonRetryable(`the ledger refused the write: ${(error as Error).message}`, PERMANENT_FAILURE_TYPES.ledgerRejected);
  }
  return error;
}

export function createRunActivities(deps: RunActivityDeps) {
  const { store, settings } = deps;

  const targetOf = (lane: string): WorkerTarget => {
    const target = settings.routing.lanes.get(lane);
    // Retried, not final: the replica whose worker took this task may not have the lane configured yet (or any more)
    // while another replica, whose worker may take the retry, has it (docs/operations.md#running-on-several-machines).
    if (!target) throw ApplicationFailure.retryable(`lane ${lane} is not a configured worker target of this replica`, UNKNOWN_LANE);
    return target;
  };

  /**
   * The run's gate, called under the activity's cancellation: a cancel of the workflow reaches the activity with its
   * next heartbeat and aborts the call, so the workflow (which waits for that) stops the run on the gate only after
   * this call has ended.
   */
  const gateClientOf = (run: RunRow, input: GateCallInput) =>
    workerGateClient(targetOf(run.lane), { timeoutMs: input.timeout_sec * 1000, trace: settings.trace, signal: Context.current().cancellationSignal });

  const requireRun = async (runId: string): Promise<RunRow> => {
    const run = await getRun(store, runId);
    if (!run) throw ApplicationFailure.nonRetryable(`unknown run '${runId}'`, PERMANENT_FAILURE_TYPES.unknownRun);
    return run;
  };

  /** What prepare and dispatch both send: the project's place on the worker and the run's routing. */
  const gateRunFields = async (run: RunRow) => {
    const project = await getProject(store, run.project_id);
    if (!project) throw ApplicationFailure.nonRetryable(`unknown project '${run.project_id}'`, PERMANENT_FAILURE_TYPES.unknownProject);
    return {
      project,
      fields: {
        run_id: run.run_id,
        project_id: project.project_id,
        project_name: project.project_name,
        project_dir: project.project_dir,
        prompt_file: promptFileFor(run.run_id),
        workload_class: run.workload_class,
        // The target, not the slot: the lane of a target's second slot is '<target>/2'.
        machine_target: settings.routing.lanes.get(run.lane)?.name ?? run.lane,
      },
    };
  };

  const runBriefOf = async (projectId: string): Promise<ProjectRunBrief> =>
    (await getProjectRunBrief(store, projectId)) ?? { research_contract: null, expected_token_budget: null };

  /** The run's token budget: its project's expected_token_budget times agent_token_budget_multiple, or none. */
  const tokenBudgetOf = async (projectId: string): Promise<number | undefined> => {
    const multiple = settings.tokenBudgetMultiple ?? 0;
    if (multiple <= 0) return undefined;
    const expected = (await runBriefOf(projectId)).expected_token_budget;
    return expected ? Math.ceil(expected * multiple) : undefined;
  };

  return {
    async claimRun(input: ClaimRunInput): Promise<{ claimed: boolean; reason?: string }> {
      // The claim runs as a local activity, on the worker that took the workflow task, and its retries stay there: a
      // lane this replica lacks is a claim lost (the item stays queued), not a failure to retry on the same worker.
      const target = settings.routing.lanes.get(input.lane);
      if (!target) return { claimed: false, reason: `lane ${input.lane} is not a configured worker target of this replica` };
      try {
        const result = await claimPlaced(store, settings, { ...input, wake_gate_url: target.wake_gate_url });
        return result.claimed ? { claimed: true } : { claimed: false, reason: result.reason };
      } catch (error) {
        if (error instanceof LaneBusyError) return { claimed: false, reason: `lane ${input.lane} is already running another item` };
        if (error instanceof GpuTakenError) return { claimed: false, reason: error.message };
        throw ledgerFailure(error);
      }
    },

    async preflightRun(input: { run_id: string; lane: string }): Promise<PreflightResult> {
      const target = targetOf(input.lane);
      return heartbeating(() => dispatchPreflight(deps, target, { run_id: input.run_id }));
    },

    async prepareRun(input: GateCallInput): Promise<Record<string, unknown>> {
      const run = await requireRun(input.run_id);
      const { project, fields } = await gateRunFields(run);
      const promptText = buildRunPrompt({
        run_id: run.run_id,
        project_id: project.project_id,
        project_name: project.project_name,
        contract: (await runBriefOf(project.project_id)).research_contract,
      });
      // overwrite: the prompt file is per run, so a retried prepare rewrites identical content.
      const body = { ...fields, prompt_text: promptText, overwrite: true };
      try {
        return await heartbeating(() => gateClientOf(run, input).prepareProject(body));
      } catch (error) {
        throw gateFailure(error);
      }
    },

    async dispatchRun(input: GateCallInput & { agent: AgentSettings }): Promise<Record<string, unknown>> {
      const run = await requireRun(input.run_id);
      const { project, fields } = await gateRunFields(run);
      const { workload_class, machine_target, ...rest } = fields;
      const tokenBudget = await tokenBudgetOf(project.project_id);
      // The placement goes only where the claim made one, so a gate older than slots takes a run that needs none.
      const placement = {
        ...(run.gpu_indices === null ? {} : { gpu_indices: run.gpu_indices }),
        ...(run.cpu_count === null ? {} : { cpu_count: run.cpu_count }),
      };
      const body = { ...rest, ...input.agent, workload_class, machine_target, ...placement, ...(tokenBudget === undefined ? {} : { token_budget: tokenBudget }) };
      try {
        return await heartbeating(() => gateClientOf(run, input).dispatch(body));
      } catch (error) {
        throw gateFailure(error);
      }
    },

    /**
     * Resumes the agent's session on its gate with the operator's answer (docs/worker-gate.md#resuming-a-run). The gate
     * takes each resume_id once, so a retried call starts nothing twice.
     */
    async resumeOnWorker(input: GateCallInput & { resume_id: string; prompt: string; allowed_tools: AllowedTool[] }): Promise<Record<string, unknown>> {
      const run = await requireRun(input.run_id);
      const body = { resume_id: input.resume_id, prompt: input.prompt, allowed_tools: input.allowed_tools };
      try {
        return await heartbeating(() => gateClientOf(run, input).resumeRun(run.run_id, body));
      } catch (error) {
        throw gateFailure(error);
      }
    },

    /** Stops a canceled run's agent on its worker. A gate that never started the run answers 404: nothing to stop. */
    async cancelOnWorker(input: GateCallInput): Promise<{ stopped: boolean; detail: unknown }> {
      const run = await requireRun(input.run_id);
      let response;
      try {
        response = await heartbeating(() => workerGateClient(targetOf(run.lane), { timeoutMs: input.timeout_sec * 1000, trace: settings.trace }).cancelRun(run.run_id));
      } catch (error) {
        throw gateFailure(error);
      }
      if (response.status === 404) return { stopped: false, detail: response.body };
      if (response.status >= 200 && response.status < 300) return { stopped: true, detail: response.body };
      throw gateFailure(new WorkerGateError(`worker gate answered ${response.status} to the cancel of ${run.run_id}`, response.status, response.status >= 500, response.body));
    },

    /** A run back from a long usage-limit wait takes its lane again (capabilities/runs/lane-retake.ts). */
    async retakeLane(input: { run_id: string }): Promise<LaneRetake> {
      const run = await getRun(store, input.run_id);
      if (!run) return { retaken: false, reason: `unknown run '${input.run_id}'`, lost: true };
      try {
        return await retakeLane(store, { run_id: run.run_id, target: settings.routing.lanes.get(run.lane)?.name ?? run.lane });
      } catch (error) {
        throw ledgerFailure(error);
      }
    },

    async transitionRun(request: TransitionRequest): Promise<TransitionOutcome> {
      let result;
      try {
        result = await store.transaction((tx) => applyRunTransition(tx, request));
      } catch (error) {
        if (error instanceof UnknownRunError) return { applied: false, reason: 'unknown run', run_state: null, queue_status: null };
        throw ledgerFailure(error);
      }
      const current = result.queue_item?.current_run_id === result.run.run_id ? result.queue_item : null;
      return {
        applied: result.applied,
        ...(result.reason ? { reason: result.reason } : {}),
        run_state: result.run.state,
        queue_status: current?.status ?? null,
      };
    },
  };
}

export type RunActivities = ReturnType<typeof createRunActivities>;
