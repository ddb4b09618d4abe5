import type { Logger } from 'pino';
import type { DispatchRequest, PrepareProjectRequest } from './contract/gate-endpoints.ts';
import type { TelemetrySample } from './contract/gate-names.ts';
import {
  markCancelled,
  markDispatchInterrupted,
  recordCancelStops,
  startingRun,
  type GateRun,
} from './domain/gate-run.ts';
import { activeRunIn } from './domain/gate-run-lookup.ts';
import { vramBaselineOf } from './domain/run-machine-share.ts';
import type { OfferedGpus, SlotHolder } from './domain/run-placement.ts';
import { RunSlots, type Placed } from './run-slots.ts';
import type { GpuInventory, LastGpuReading } from './telemetry/sampler.ts';
import type { WorkloadClass } from './contract/workload.ts';
import type { PinnedDir } from '../platform/files/pinned-dir.ts';
import { HttpError } from '../platform/http/errors.ts';
import { payloadHash } from '../platform/http/payload-hash.ts';
import { randomToken, sha256Hex } from '../platform/http/tokens.ts';
import { confinementFor, pinProject, recordScriptStarted, runEnvironment, runScriptOf, type Confinement } from './run-launch.ts';
import type { AgentSandbox } from './agent-sandbox/index.ts';
import { agentStartFor, checkDispatchOptions, type AgentStart } from './agent-start.ts';
import { runtimeFor, type WorkerGateConfig } from './gate-config.ts';
import type { GateEventLog } from './gate-event-log.ts';
import { prepareProject, type PrepareResult } from './prepare-project.ts';
import { readProcessTable } from './process-table.ts';
import { findTrackedProcesses, trackingTargetOf } from './process-tracking.ts';
import { isStrictlyInside, resolveProjectPaths } from './project-paths.ts';
import type { CancelsBeforeDispatch, RunRecords } from './run-records.ts';
import { reapProcesses, type ReapResult } from './stale-reaper.ts';
import { reopenRunCgroup, runLimitsFor, stopAndRemove, type RunCgroup, type RunCgroupHost } from './run-cgroups/index.ts';

export interface DispatchResponse {
  ok: true;
  run_id: string;
  project_id: string;
  project_dir: string;
  workload_class: WorkloadClass;
  root_pid: number | null;
  process_group_id: number | null;
  tmux_session: string | null;
  vram_baseline_mib: number | null;
  gate_state: GateRun['gate_state'];
  dispatched_at: string;
  /** True when this run had been dispatched before: the script did not run again. */
  already_dispatched: boolean;
  script_output: Record<string, unknown>;
  /** The GPUs the run was given; null: not pinned. */
  gpu_indices: number[] | null;
  /** The CPUs its cgroup is pinned to; null: not pinned. */
  cpus: number[] | null;
  /** Why a cpu_count was not applied; null otherwise. */
  cpus_unpinned_reason: string | null;
}

export interface CancelResponse {
  ok: true;
  run_id: string;
  gate_state: 'cancelled';
  already_cancelled: boolean;
  /** What happened to each process the run still had. */
  stopped: ReapResult[];
}

export interface GateDispatcherOptions {
  config: WorkerGateConfig;
  logger: Logger;
  runs: RunRecords;
  /** Cancels that came before the gate saw the run's dispatch: that dispatch is refused. */
  cancelsBeforeDispatch: CancelsBeforeDispatch;
  events: GateEventLog;
  /** This gate's `/legacy-agent/event` URL as agents on this machine reach it. */
  eventUrl: () => string;
  /** The machine's latest telemetry reading: its VRAM use is the run's baseline. */
  latestSample: () => TelemetrySample | undefined;
  /** The GPU query behind it, per GPU: a run given GPUs takes its baseline on those. */
  latestGpuReading: () => LastGpuReading;
  /** The machine's GPUs, which run_gpus 'all' offers. */
  gpuInventory: () => Promise<GpuInventory>;
  /** Where each run gets its own cgroup (none where the gate has no cgroups). */
  cgroups: RunCgroupHost;
  /** The user and sandbox agents run as and in (docs/security.md#security-model). */
  sandbox: AgentSandbox;
  /** Told just before a run's agent starts: its transcript follows the tool's stream from there. */
  launching?: (runId: string, start: AgentStart) => void;
}

/** What makes two /dispatch calls the same request; the display name may differ. */
function requestHash(request: DispatchRequest, workloadClass: WorkloadClass): string {
  const { project_name: _name, ...rest } = request;
  return payloadHash({ ...rest, workload_class: workloadClass });
}

function dispatchResponse(run: GateRun, alreadyDispatched: boolean): DispatchResponse {
  return {
    ok: true,
    run_id: run.run_id,
    project_id: run.project_id,
    project_dir: run.project_dir,
    workload_class: run.workload_class,
    root_pid: run.root_pid,
    process_group_id: run.process_group_id,
    tmux_session: run.tmux_session,
    vram_baseline_mib: run.vram_baseline_mib,
    gate_state: run.gate_state,
    dispatched_at: run.dispatched_at,
    already_dispatched: alreadyDispatched,
    script_output: run.script_output,
    gpu_indices: run.gpu_indices ?? null,
    cpus: run.cpus ?? null,
    cpus_unpinned_reason: run.cpus_unpinned_reason ?? null,
  };
}

/** Starts and stops agents: prepares workspaces, runs the dispatch script once per run_id, cancels runs. */
export class GateDispatcher {
  private readonly dispatchesInFlight = new Map<string, { hash: string; promise: Promise<DispatchResponse> }>();
  private readonly slots: RunSlots;

  private readonly options: GateDispatcherOptions;

  constructor(options: GateDispatcherOptions) {
    this.options = options;
    this.slots = new RunSlots({ config: options.config, runs: options.runs, cpuPinning: () => options.cgroups.cpuPinning(), gpuInventory: options.gpuInventory });
  }

  /** Marks the records a previous process left mid-dispatch: their agent is never started a second time. */
  recoverInterruptedDispatches(): void {
    for (const run of this.options.runs.all()) {
      if (run.dispatch_status !== 'starting') continue;
      const interrupted = this.options.runs.save(markDispatchInterrupted(run));
      this.options.events.append('dispatch_interrupted', interrupted.run_id, { reason: interrupted.gate_reason });
    }
  }

  /** The runs holding a slot (docs/worker-gate.md#slots-and-gpus): every unsettled run, and those being placed now. */
  slotHolders(): SlotHolder[] {
    return this.slots.holders();
  }

  prepare(request: PrepareProjectRequest): PrepareResult {
    const result = prepareProject(this.options.config.project_root, request);
    if (result.created) {
      this.options.events.append('project_prepared', request.run_id, { project_id: request.project_id, project_dir: result.project_dir, overwritten: result.overwritten });
    }
    return result;
  }

  /** Runs the dispatch script once per run_id; a repeated call with the same body answers the first result. */
  async dispatch(request: DispatchRequest): Promise<DispatchResponse> {
    const workloadClass = request.workload_class ?? this.options.config.default_workload_class;
    const hash = requestHash(request, workloadClass);
    const conflict = () => new HttpError(409, `run '${request.run_id}' was already dispatched with a different request`);

    this.refuseIfCancelledBeforeDispatch(request.run_id);
    const inFlight = this.dispatchesInFlight.get(request.run_id);
    if (inFlight) {
      if (inFlight.hash !== hash) throw conflict();
      return { ...(await inFlight.promise), already_dispatched: true };
    }
    const existing = this.options.runs.get(request.run_id);
    if (existing) {
      if (existing.request_hash !== hash) throw conflict();
      if (existing.dispatch_status === 'interrupted') {
        throw new HttpError(409, `run '${request.run_id}': the gate restarted while its dispatch script ran, so whether the agent started is unknown; it is not started again`);
      }
      return dispatchResponse(existing, true);
    }
    const promise = this.startRun(request, workloadClass, hash);
    this.dispatchesInFlight.set(request.run_id, { hash, promise });
    try {
      return await promise;
    } finally {
      this.dispatchesInFlight.delete(request.run_id);
    }
  }

  private async startRun(request: DispatchRequest, workloadClass: WorkloadClass, hash: string): Promise<DispatchResponse> {
    const { config, runs } = this.options;
    const resolved = resolveProjectPaths(config.project_root, request.project_dir, request.prompt_file);
    if (!resolved.ok) throw new HttpError(400, resolved.reason);
    const { projectDir, promptFile } = resolved.paths;
    const runtime = runtimeFor(config, workloadClass);
    checkDispatchOptions(runtime, request);
    // A real tool's runner reads the prompt through the pinned project, the only directory of the run it opens.
    if (runtime !== 'script' && !isStrictlyInside(projectDir, promptFile)) {
      throw new HttpError(400, `prompt_file must lie inside project_dir for agent_runtime '${runtime}'`);
    }
    // Asked before the checks below, which must run without a pause between them and the reservation.
    const offered = await this.slots.offeredGpusFor(request);
    const busy = activeRunIn(runs.all(), projectDir);
    if (busy) throw new HttpError(409, `project_dir ${projectDir} already has an active run '${busy.run_id}' (${busy.gate_state})`);
    const project = pinProject(config.project_root, projectDir);
    let placed: Placed;
    try {
      placed = this.place(request, offered);
    } catch (error) {
      project.close();
      throw error;
    }
    try {
      const start = agentStartFor(config, runtime, projectDir, request);
      const confinement = confinementFor(this.options.sandbox, runtime === 'script' ? start.scriptPath : null, project, projectDir, promptFile);
      return await this.startRunIn(project, start, confinement, { projectDir, promptFile, placed }, request, workloadClass, hash);
    } finally {
      this.slots.release(request.run_id);
      project.close();
    }
  }

  /**
   * A slot, the GPUs it names and the CPUs its cpu_count asks for, reserved until the run's record holds them; or 409
   * naming what holds them (docs/worker-gate.md#slots-and-gpus).
   */
  private place(request: DispatchRequest, offered: OfferedGpus | null): Placed {
    const reserved = this.slots.reserve(request, offered);
    if (reserved.ok) return reserved.placed;
    this.options.events.append('dispatch_refused', request.run_id, { reason: 'no_capacity', detail: reserved.reason });
    this.options.logger.info({ run_id: request.run_id, reason: reserved.reason }, 'dispatch refused: no room on this gate');
    throw new HttpError(409, reserved.reason);
  }

  private async startRunIn(
    project: PinnedDir,
    start: AgentStart,
    confinement: Confinement,
    { projectDir, promptFile, placed }: { projectDir: string; promptFile: string; placed: Placed },
    request: DispatchRequest,
    workloadClass: WorkloadClass,
    hash: string,
  ): Promise<DispatchResponse> {
    const { config, runs, events, logger } = this.options;

    // Made before anything of the run starts, so its first process is inside it: membership is exact from then on.
    const { gpu_indices: gpuIndices, cpus } = placed.holder;
    const cgroup = await this.createCgroup(request.run_id, workloadClass, cpus);
    // A cancel may have come while the cgroup was made: from the record on, a cancel finds the run and stops it.
    try {
      this.refuseIfCancelledBeforeDispatch(request.run_id);
    } catch (error) {
      if (cgroup) await this.stopCgroup(request.run_id, cgroup);
      throw error;
    }
    // The agent's only credential: good for its own run's events, and kept here as a hash alone.
    const eventToken = randomToken();
    const starting = startingRun(
      {
        run_id: request.run_id,
        project_id: request.project_id,
        project_name: request.project_name ?? request.project_id,
        project_dir: projectDir,
        prompt_file: promptFile,
        workload_class: workloadClass,
        machine_target: request.machine_target ?? null,
        mode: request.mode,
        model: request.model,
        reasoning_effort: request.reasoning_effort,
        sandbox: start.sandbox,
        token_budget: request.token_budget ?? null,
        request_hash: hash,
        event_token_sha256: sha256Hex(eventToken),
        vram_baseline_mib: vramBaselineOf(this.options.latestGpuReading(), gpuIndices, this.options.latestSample()?.vram_used_mib ?? null),
        cgroup: cgroup?.record() ?? null,
        gpu_indices: gpuIndices ? [...gpuIndices] : null,
        cpus: cpus ? [...cpus] : null,
        cpus_unpinned_reason: placed.cpusUnpinnedReason,
      },
      new Date().toISOString(),
    );
    // Written before the script runs: a gate that dies now must not start the agent a second time after restart.
    runs.save(starting);
    const env = this.options.sandbox.environment(process.env, runEnvironment(starting, { eventUrl: this.options.eventUrl(), eventToken, start, confinement, tokenBudget: request.token_budget ?? null }), confinement.plan);
    this.options.launching?.(starting.run_id, start);
    const result = await runScriptOf(runs, starting, { scriptPath: start.scriptPath, project, timeoutMs: config.dispatch_timeout_sec * 1000, cgroup, confinement, env });
    if (!result.ok) {
      if (cgroup) await this.stopCgroup(starting.run_id, cgroup);
      runs.remove(starting.run_id);
      events.append('dispatch_failed', starting.run_id, { status: result.status, ...result.detail });
      logger.warn({ run_id: starting.run_id, status: result.status, message: result.detail.message }, 'dispatch failed');
      throw new HttpError(result.status, result.detail);
    }
    const run = recordScriptStarted(runs, starting, result);
    events.append('dispatched', run.run_id, {
      project_id: run.project_id,
      root_pid: run.root_pid,
      process_group_id: run.process_group_id,
      workload_class: run.workload_class,
      duration_ms: result.duration_ms,
    });
    logger.info({ run_id: run.run_id, root_pid: run.root_pid, ms: result.duration_ms }, 'run dispatched');
    return dispatchResponse(run, false);
  }

  /**
   * Stops a run on the control plane's request: the run is marked cancelled first (so the gate sends nothing more for
   * it), then every process tracked for it gets SIGTERM and, after the reaper's grace, SIGKILL. Idempotent.
   */
  async cancel(runId: string): Promise<CancelResponse> {
    const { runs, events, logger, config } = this.options;
    const current = runs.get(runId);
    if (!current) {
      const known = this.options.cancelsBeforeDispatch.cancelledAt(runId);
      this.options.cancelsBeforeDispatch.remember(runId);
      if (!known) events.append('cancelled_before_dispatch', runId);
      throw new HttpError(404, `unknown run '${runId}': nothing runs for it here, and a later dispatch of it will be refused`);
    }
    if (current.gate_state === 'cancelled') return { ok: true, run_id: runId, gate_state: 'cancelled', already_cancelled: true, stopped: [] };
    const cancelled = runs.save(markCancelled(current));
    let outcomes: ReapResult[];
    if (cancelled.cgroup) {
      outcomes = await this.stopCgroup(runId, reopenRunCgroup(cancelled.cgroup));
    } else {
      const tracked = findTrackedProcesses(readProcessTable({ withCwd: true }), trackingTargetOf(cancelled));
      const victims = tracked.alive.filter((proc) => proc.pid !== process.pid && proc.pid !== process.ppid);
      outcomes = await reapProcesses(victims, { termGraceSec: config.stale_project_process_term_grace_sec });
    }
    runs.save(recordCancelStops(runs.get(runId) ?? cancelled, outcomes, new Date().toISOString()));
    events.append('run_cancelled', runId, { stopped: outcomes });
    logger.info({ run_id: runId, stopped: outcomes.length }, 'run cancelled');
    return { ok: true, run_id: runId, gate_state: 'cancelled', already_cancelled: false, stopped: outcomes };
  }

  /** 409 for a run whose cancel came before its dispatch: the control plane already counts it as stopped. */
  private refuseIfCancelledBeforeDispatch(runId: string): void {
    const cancelledAt = this.options.cancelsBeforeDispatch.cancelledAt(runId);
    if (cancelledAt === undefined) return;
    this.options.events.append('dispatch_refused', runId, { reason: 'cancelled_before_dispatch', cancelled_at: cancelledAt });
    this.options.logger.warn({ run_id: runId, cancelled_at: cancelledAt }, 'dispatch refused: the run was cancelled before its dispatch arrived');
    throw new HttpError(409, `run '${runId}' was cancelled at ${cancelledAt}, before its dispatch reached this gate; it is not started`);
  }

  /** The run's new cgroup with its workload profile's limits, pinned to `cpus` when given; null where the gate has no cgroups. */
  private async createCgroup(runId: string, workloadClass: WorkloadClass, cpus: readonly number[] | null): Promise<RunCgroup | null> {
    try {
      return await this.options.cgroups.create(runId, runLimitsFor(this.options.config, workloadClass), cpus);
    } catch (error) {
      throw new HttpError(502, `run '${runId}': its cgroup could not be made: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** Stops every process of the run's cgroup at once (the kernel's kill, no fork can outrun it), then removes it. */
  private async stopCgroup(runId: string, cgroup: RunCgroup): Promise<ReapResult[]> {
    const members = cgroup.pids();
    try {
      await stopAndRemove(cgroup);
      this.options.events.append('run_cgroup_removed', runId, { killed: members.length, paths: cgroup.record().paths });
      return members.map((pid) => ({ pid, outcome: 'killed' as const }));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.options.logger.error({ run_id: runId, err: error }, 'stopping the run cgroup failed');
      return members.map((pid) => ({ pid, outcome: 'error' as const, error: message }));
    }
  }
}
