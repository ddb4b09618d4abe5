import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { HttpError } from '../http/errors.ts';
import { sha256Hex } from '../http/tokens.ts';
import type { Config } from '../config/schema.ts';
import {
  applyLifecycleEvent,
  freshSession,
  isAwaitingQuietWindow,
  readyCallbackFor,
  type GateSession,
} from '../domain/gate-lifecycle.ts';
import { callbackIdempotencyKey, SETTLED_GATE_STATES, type CallbackEventType, type TelemetrySample } from '../domain/gate.ts';
import { evaluateQuietWindow, samplesNeeded, toWindowSample, type QuietWindowMetrics } from '../domain/quiet-window.ts';
import type { RunEvidence, WorkerCallback } from '../contracts/worker-callback.ts';
import { resolveWorkloadProfile, WORKLOAD_CLASSES, type GateThresholdProfile, type WorkloadClass } from '../domain/workload.ts';
import { CallbackOutbox } from './callback-outbox.ts';
import { dispatchEnvironment, runDispatchScript } from './dispatch-script.ts';
import { inspectEvidence } from './evidence.ts';
import { GateEventLog } from './gate-event-log.ts';
import type { ControlPlaneEvent, DispatchRequest, PrepareProjectRequest } from '../contracts/worker-gate.ts';
import { prepareProject, type PrepareResult } from './prepare-project.ts';
import { clockTicksPerSecond, readCmdline, readProcessStat, readProcessTable, type ProcessInfo } from './process-table.ts';
import { findTrackedProcesses, type TrackingTarget } from './process-tracking.ts';
import { resolveProjectPaths } from './project-paths.ts';
import { RunRecords, type GateRun } from './run-records.ts';
import { payloadHash } from '../http/payload-hash.ts';
import { reapProcesses, selectStaleProcesses, type ReapResult } from './stale-reaper.ts';
import { parseProcStat } from './telemetry/proc-parsers.ts';
import { TelemetrySampler } from './telemetry/sampler.ts';

export type WorkerGateConfig = Pick<
  Config,
  | 'state_dir'
  | 'project_root'
  | 'dispatch_script_path'
  | 'dispatch_timeout_sec'
  | 'sample_interval_sec'
  | 'idle_sustain_sec'
  | 'cpu_idle_threshold_pct'
  | 'gpu_idle_avg_threshold_pct'
  | 'gpu_idle_peak_threshold_pct'
  | 'vram_delta_threshold_mib'
  | 'max_wait_after_idle_sec'
  | 'default_workload_class'
  | 'workload_profiles'
  | 'stale_project_process_reaper_enabled'
  | 'stale_project_process_grace_sec'
  | 'stale_project_process_term_grace_sec'
  | 'stale_project_process_command_markers'
  | 'completion_callback_url'
  | 'completion_callback_token'
  | 'completion_callback_timeout_sec'
  | 'control_api_bearer_token'
>;

export interface WorkerGateOptions {
  config: WorkerGateConfig;
  logger: Logger;
  /** This gate's `/legacy-agent/event` URL as agents on this machine reach it; known once the server listens. */
  eventUrl: () => string;
}

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
}

export interface CancelResponse {
  ok: true;
  run_id: string;
  gate_state: 'cancelled';
  already_cancelled: boolean;
  /** What happened to each process the run still had. */
  stopped: ReapResult[];
}

export interface EventResponse {
  ok: true;
  recorded: true;
  run_id: string | null;
  ignored: boolean;
  ignore_reason?: string;
  gate_state?: GateRun['gate_state'];
  session_reset?: boolean;
  callbacks: string[];
}

const SERVICE_NAME = 'research-control-plane worker gate';
const UNSETTLED_COUNTED_AS_WAITING = new Set(['question_pending']);

const isoNow = () => new Date().toISOString();

/** What makes two /dispatch calls the same request; the display name may differ. */
function requestHash(request: DispatchRequest, workloadClass: WorkloadClass): string {
  const { project_name: _name, ...rest } = request;
  return payloadHash({ ...rest, workload_class: workloadClass });
}

/**
 * The worker-machine service: prepares workspaces, runs the dispatch script, follows the agent's lifecycle events,
 * tracks its processes and the machine's telemetry, and reports readiness through a durable callback outbox.
 */
export class WorkerGate {
  private readonly config: WorkerGateConfig;
  private readonly logger: Logger;
  private readonly runs: RunRecords;
  private readonly events: GateEventLog;
  private readonly outbox: CallbackOutbox;
  private readonly sampler = new TelemetrySampler();
  private readonly samples: TelemetrySample[] = [];
  private readonly dispatchesInFlight = new Map<string, { hash: string; promise: Promise<DispatchResponse> }>();
  private readonly reaping = new Set<number>();
  private readonly ticksPerSec = clockTicksPerSecond();
  private readonly btimeSec: number;
  private readonly maxSamplesKept: number;
  private readonly startedAt = isoNow();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = false;
  private ready = false;
  private lastTickError: string | null = null;
  /** CPU time spent sampling (telemetry, /proc scan, evaluation), so operators can see what the gate costs. */
  private readonly sampling = { samples: 0, cpu_ms: 0 };

  constructor(private readonly options: WorkerGateOptions) {
    this.config = options.config;
    this.logger = options.logger.child({ component: 'worker-gate' });
    const dir = join(this.config.state_dir, 'worker-gate');
    this.runs = new RunRecords(join(dir, 'runs'), this.logger);
    this.events = new GateEventLog(join(dir, 'events.jsonl'));
    this.outbox = new CallbackOutbox({
      dir: join(dir, 'outbox'),
      url: this.config.completion_callback_url,
      token: this.config.completion_callback_token,
      timeoutSec: this.config.completion_callback_timeout_sec,
      logger: this.logger,
      onDelivered: (entry) =>
        this.events.append('callback_delivered', entry.run_id, { event_type: entry.event_type, idempotency_key: entry.idempotency_key, attempts: entry.attempts }),
    });
    this.btimeSec = parseProcStat(readFileSync('/proc/stat', 'utf8'))?.btimeSec ?? 0;
    const longestSustain = Math.max(...WORKLOAD_CLASSES.map((cls) => this.profileFor(cls).idle_sustain_sec));
    this.maxSamplesKept = Math.ceil(longestSustain / this.config.sample_interval_sec) + 10;
  }

  /** Loads the records a previous process left, resumes tracking and resends pending callbacks, then samples. */
  async start(): Promise<void> {
    this.events.load();
    this.outbox.load();
    for (const run of this.runs.load()) {
      if (run.dispatch_status === 'starting') this.markInterruptedDispatch(run);
    }
    const resumed = this.runs.all().filter((run) => !SETTLED_GATE_STATES.has(run.gate_state));
    this.events.append('gate_started', null, { resumed_runs: resumed.map((run) => run.run_id), callbacks_pending: this.outbox.pendingCount() });
    this.logger.info({ resumed_runs: resumed.length, callbacks_pending: this.outbox.pendingCount() }, 'worker gate started');
    this.outbox.start();
    await this.tick();
    this.ready = true;
    this.timer = setInterval(() => void this.tick(), this.config.sample_interval_sec * 1000);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.ticking;
    await this.outbox.stop();
  }

  isReady(): boolean {
    return this.ready && !this.stopped;
  }

  // ---- commands -------------------------------------------------------------------------------------------

  prepare(request: PrepareProjectRequest): PrepareResult {
    const result = prepareProject(this.config.project_root, request);
    if (result.created) {
      this.events.append('project_prepared', request.run_id, { project_id: request.project_id, project_dir: result.project_dir, overwritten: result.overwritten });
    }
    return result;
  }

  /** Runs the dispatch script once per run_id; a repeated call with the same body answers the first result. */
  async dispatch(request: DispatchRequest): Promise<DispatchResponse> {
    const workloadClass = request.workload_class ?? this.config.default_workload_class;
    const hash = requestHash(request, workloadClass);
    const conflict = () => new HttpError(409, `run '${request.run_id}' was already dispatched with a different request`);

    const inFlight = this.dispatchesInFlight.get(request.run_id);
    if (inFlight) {
      if (inFlight.hash !== hash) throw conflict();
      return { ...(await inFlight.promise), already_dispatched: true };
    }
    const existing = this.runs.get(request.run_id);
    if (existing) {
      if (existing.request_hash !== hash) throw conflict();
      if (existing.dispatch_status === 'interrupted') {
        throw new HttpError(409, `run '${request.run_id}': the gate restarted while its dispatch script ran, so whether the agent started is unknown; it is not started again`);
      }
      return this.dispatchResponse(existing, true);
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
    const resolved = resolveProjectPaths(this.config.project_root, request.project_dir, request.prompt_file);
    if (!resolved.ok) throw new HttpError(400, resolved.reason);
    const { projectDir, promptFile } = resolved.paths;
    if (!existsSync(projectDir) || !statSync(projectDir).isDirectory()) {
      throw new HttpError(409, `project_dir ${projectDir} does not exist; call /prepare-project first`);
    }
    const busy = this.runs.all().find((run) => run.project_dir === projectDir && !SETTLED_GATE_STATES.has(run.gate_state));
    if (busy) throw new HttpError(409, `project_dir ${projectDir} already has an active run '${busy.run_id}' (${busy.gate_state})`);

    const now = isoNow();
    const run: GateRun = {
      ...freshSession(),
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
      sandbox: request.sandbox,
      request_hash: hash,
      dispatch_status: 'starting',
      dispatched_at: now,
      dispatch_duration_ms: null,
      script_output: {},
      root_pid: null,
      root_start_ticks: null,
      process_group_id: null,
      tmux_session: null,
      vram_baseline_mib: this.latestSample()?.vram_used_mib ?? null,
      known_pids: [],
      alive_pids: [],
      root_alive: false,
      processes_alive: false,
      last_process_alive_at: null,
      processes_exited_at: null,
      reaped: [],
      quiet_window: null,
      callbacks: [],
      events_received: 0,
      events_ignored: 0,
      created_at: now,
      updated_at: now,
    };
    // Written before the script runs: a gate that dies now must not start the agent a second time after restart.
    this.runs.save(run);
    const result = await runDispatchScript({
      scriptPath: this.config.dispatch_script_path,
      cwd: projectDir,
      timeoutMs: this.config.dispatch_timeout_sec * 1000,
      env: dispatchEnvironment(process.env, {
        RUN_ID: request.run_id,
        PROJECT_ID: request.project_id,
        PROJECT_DIR: projectDir,
        PROMPT_FILE: promptFile,
        DISPATCH_MODE: request.mode,
        MODEL: request.model,
        REASONING_EFFORT: request.reasoning_effort,
        SANDBOX: request.sandbox,
        GATE_EVENT_URL: this.options.eventUrl(),
        GATE_EVENT_TOKEN: this.config.control_api_bearer_token,
      }),
    });
    if (!result.ok) {
      this.runs.remove(run.run_id);
      this.events.append('dispatch_failed', run.run_id, { status: result.status, ...result.detail });
      this.logger.warn({ run_id: run.run_id, status: result.status, message: result.detail.message }, 'dispatch failed');
      throw new HttpError(result.status, result.detail);
    }
    const output = result.output;
    run.dispatch_status = 'started';
    run.dispatch_duration_ms = result.duration_ms;
    run.script_output = output;
    run.root_pid = output.root_pid ?? null;
    run.process_group_id = output.process_group_id ?? null;
    run.tmux_session = output.tmux_session ?? null;
    this.adoptRoot(run, run.root_pid);
    this.runs.save(run);
    this.events.append('dispatched', run.run_id, {
      project_id: run.project_id,
      root_pid: run.root_pid,
      process_group_id: run.process_group_id,
      workload_class: run.workload_class,
      duration_ms: result.duration_ms,
    });
    this.logger.info({ run_id: run.run_id, root_pid: run.root_pid, ms: result.duration_ms }, 'run dispatched');
    return this.dispatchResponse(run, false);
  }

  /**
   * Stops a run on the control plane's request: the run is marked cancelled first (so the gate sends nothing more for
   * it), then every process tracked for it gets SIGTERM and, after the reaper's grace, SIGKILL. Idempotent.
   */
  async cancel(runId: string): Promise<CancelResponse> {
    const run = this.runs.get(runId);
    if (!run) throw new HttpError(404, `unknown run '${runId}'`);
    if (run.gate_state === 'cancelled') return { ok: true, run_id: runId, gate_state: 'cancelled', already_cancelled: true, stopped: [] };
    run.gate_state = 'cancelled';
    run.gate_reason = 'cancelled by the control plane';
    this.runs.save(run);
    const tracked = findTrackedProcesses(readProcessTable({ withCwd: true }), this.trackingTargetOf(run));
    const victims = tracked.alive.filter((proc) => proc.pid !== process.pid && proc.pid !== process.ppid);
    const outcomes = await reapProcesses(victims, { termGraceSec: this.config.stale_project_process_term_grace_sec });
    const at = isoNow();
    for (const outcome of outcomes) run.reaped.push({ pid: outcome.pid, outcome: outcome.outcome, at, command: 'cancelled run' });
    run.alive_pids = [];
    run.processes_alive = false;
    this.runs.save(run);
    this.events.append('run_cancelled', run.run_id, { stopped: outcomes });
    this.logger.info({ run_id: run.run_id, stopped: outcomes.length }, 'run cancelled');
    return { ok: true, run_id: runId, gate_state: 'cancelled', already_cancelled: false, stopped: outcomes };
  }

  /** Applies a lifecycle event from the agent runtime. Events for runs the gate does not know are recorded and ignored. */
  recordEvent(event: ControlPlaneEvent): EventResponse {
    const receivedAt = isoNow();
    const run = this.findRunForEvent(event);
    const summary = { event: event.event, session_id: event.session_id ?? null, project_id: event.project_id ?? null, agent_timestamp: event.timestamp ?? null };
    if (!run) {
      this.events.append('lifecycle_event', event.run_id ?? null, { ...summary, ignored: true, ignore_reason: 'unknown run' });
      return { ok: true, recorded: true, run_id: event.run_id ?? null, ignored: true, ignore_reason: 'unknown run', callbacks: [] };
    }
    const outcome = applyLifecycleEvent(run, {
      event: event.event,
      session_id: event.session_id,
      question: event.question,
      message: event.message,
      received_at: receivedAt,
    });
    Object.assign(run, outcome.session);
    run.events_received += 1;
    if (outcome.ignored_reason) run.events_ignored += 1;
    if (outcome.session_reset) run.callbacks = [];
    if (run.root_pid === null && event.root_pid) this.adoptRoot(run, event.root_pid);
    run.process_group_id ??= event.process_group_id ?? null;
    run.tmux_session ??= event.tmux_session ?? null;

    const keys = outcome.callbacks.map(({ event_type, observed_at }) => this.sendCallback(run, event_type, observed_at, outcome.session.gate_reason));
    this.runs.save(run);
    this.events.append('lifecycle_event', run.run_id, {
      ...summary,
      gate_state: run.gate_state,
      ignored: outcome.ignored_reason !== undefined,
      ...(outcome.ignored_reason ? { ignore_reason: outcome.ignored_reason } : {}),
      ...(outcome.session_reset ? { session_reset: true } : {}),
    });
    return {
      ok: true,
      recorded: true,
      run_id: run.run_id,
      ignored: outcome.ignored_reason !== undefined,
      ...(outcome.ignored_reason ? { ignore_reason: outcome.ignored_reason } : {}),
      gate_state: run.gate_state,
      session_reset: outcome.session_reset,
      callbacks: keys,
    };
  }

  // ---- reads ------------------------------------------------------------------------------------------------

  dashboard(limit: number, eventLimit: number) {
    const runs = this.runs.all().sort((a, b) => b.updated_at.localeCompare(a.updated_at));
    const sample = this.latestSample();
    return {
      ok: true,
      service: {
        name: SERVICE_NAME,
        role: 'worker_gate',
        ready: this.isReady(),
        started_at: this.startedAt,
        project_root: this.config.project_root,
        sample_interval_sec: this.config.sample_interval_sec,
        default_workload_class: this.config.default_workload_class,
        max_wait_after_idle_sec: this.config.max_wait_after_idle_sec,
        stale_project_process_reaper_enabled: this.config.stale_project_process_reaper_enabled,
        completion_callback_url: this.config.completion_callback_url,
        completion_callback_token_fingerprint: sha256Hex(this.config.completion_callback_token),
        last_tick_error: this.lastTickError,
        sampling: {
          samples: this.sampling.samples,
          cpu_ms_per_sample: this.sampling.samples ? Math.round((this.sampling.cpu_ms / this.sampling.samples) * 1000) / 1000 : null,
        },
      },
      totals: {
        runs: runs.length,
        active_or_waiting: runs.filter((run) => !SETTLED_GATE_STATES.has(run.gate_state) || UNSETTLED_COUNTED_AS_WAITING.has(run.gate_state)).length,
        live: runs.filter((run) => run.processes_alive).length,
        callback_pending: this.outbox.pendingCount(),
      },
      telemetry: {
        sampled_at: sample ? new Date(sample.at_ms).toISOString() : null,
        cpu_pct: sample?.cpu_pct ?? null,
        gpu_pct: sample?.gpu_pct ?? null,
        gpu_compute_pids: sample?.gpu_compute_pids ?? [],
        vram_used_mib: sample?.vram_used_mib ?? null,
        memory_available_mib: sample?.memory_available_mib ?? null,
        memory_source: sample?.memory_source ?? null,
        gpu_source: sample?.gpu_source ?? null,
        notes: sample?.notes ?? [],
      },
      runs: runs.slice(0, limit).map((run) => this.runView(run)),
      callbacks: this.outbox
        .list()
        .slice(-limit)
        .reverse()
        .map(({ payload: _payload, ...entry }) => entry),
      events: this.events.latest(eventLimit),
    };
  }

  // ---- sampling loop ----------------------------------------------------------------------------------------

  private tick(): Promise<void> {
    if (this.ticking || this.stopped) return this.ticking ?? Promise.resolve();
    const cpuBefore = process.cpuUsage();
    this.ticking = this.observe()
      .then(() => {
        this.lastTickError = null;
        const used = process.cpuUsage(cpuBefore);
        this.sampling.samples += 1;
        this.sampling.cpu_ms += (used.user + used.system) / 1000;
      })
      .catch((error: Error) => {
        this.lastTickError = error.message;
        this.logger.error({ err: error }, 'gate sampling failed');
      })
      .finally(() => {
        this.ticking = undefined;
      });
    return this.ticking;
  }

  private async observe(): Promise<void> {
    const sample = await this.sampler.sample();
    this.samples.push(sample);
    if (this.samples.length > this.maxSamplesKept) this.samples.splice(0, this.samples.length - this.maxSamplesKept);
    const watched = this.runs.all().filter((run) => run.dispatch_status === 'started' && !SETTLED_GATE_STATES.has(run.gate_state));
    if (watched.length === 0) return;
    const table = readProcessTable({ withCwd: true });
    for (const run of watched) this.observeRun(run, table, sample);
  }

  private observeRun(run: GateRun, table: ProcessInfo[], sample: TelemetrySample): void {
    const before = JSON.stringify([run.gate_state, run.gate_reason, run.alive_pids, run.root_alive]);
    const nowIso = new Date(sample.at_ms).toISOString();
    const tracked = findTrackedProcesses(table, this.trackingTargetOf(run));
    const alive = tracked.alive.filter((proc) => proc.pid !== process.pid);
    for (const proc of alive) {
      if (!run.known_pids.some((known) => known.pid === proc.pid && known.startTicks === proc.startTicks)) {
        run.known_pids.push({ pid: proc.pid, startTicks: proc.startTicks });
      }
    }
    run.alive_pids = alive.map((proc) => proc.pid);
    run.root_alive = tracked.rootAlive;
    run.processes_alive = alive.length > 0;
    if (run.processes_alive) {
      run.last_process_alive_at = nowIso;
      run.processes_exited_at = null;
    } else {
      run.processes_exited_at ??= nowIso;
    }

    if (!run.root_alive && run.processes_alive) this.reapStale(run, table, sample);

    if (isAwaitingQuietWindow(run)) this.evaluateWindow(run, sample);
    else if (run.gate_state === 'running') this.checkSilentExit(run);

    if (JSON.stringify([run.gate_state, run.gate_reason, run.alive_pids, run.root_alive]) !== before) this.runs.save(run);
  }

  private trackingTargetOf(run: GateRun): TrackingTarget {
    return {
      ...(run.root_pid !== null ? { rootPid: run.root_pid } : {}),
      ...(run.root_start_ticks !== null ? { rootStartTicks: run.root_start_ticks } : {}),
      ...(run.process_group_id !== null ? { processGroupId: run.process_group_id } : {}),
      projectDir: run.project_dir,
      known: run.known_pids,
    };
  }

  private evaluateWindow(run: GateRun, sample: TelemetrySample): void {
    const idleSeenAtMs = Date.parse(run.idle_seen_at as string);
    const verdict = evaluateQuietWindow({
      profile: this.profileFor(run.workload_class),
      sampleIntervalSec: this.config.sample_interval_sec,
      samples: this.samples.map(toWindowSample),
      vramBaselineMib: run.vram_baseline_mib,
      idleSeenAtMs,
      processesAlive: run.processes_alive,
      lastProcessAliveAtMs: run.last_process_alive_at ? Date.parse(run.last_process_alive_at) : null,
      nowMs: sample.at_ms,
      maxWaitAfterIdleSec: this.config.max_wait_after_idle_sec,
    });
    run.quiet_window = { ...verdict.metrics, verdict: verdict.verdict, reasons: verdict.reasons };
    const reason = verdict.reasons.join('; ');
    switch (verdict.verdict) {
      case 'waiting_for_process_exit':
      case 'waiting_for_quiet_window':
        run.gate_state = run.ended ? 'finished_pending_gate' : verdict.verdict;
        run.gate_reason = reason || verdict.verdict;
        return;
      case 'ready': {
        const ready = readyCallbackFor(run);
        run.gate_state = ready.gate_state;
        run.gate_reason = `quiet for ${this.profileFor(run.workload_class).idle_sustain_sec} s and no tracked process alive`;
        this.sendCallback(run, ready.event_type, run.idle_seen_at as string, run.gate_reason, verdict.metrics, inspectEvidence(run.project_dir));
        return;
      }
      case 'timed_out':
        run.gate_state = 'error';
        run.gate_reason = `no quiet window within max_wait_after_idle_sec (${this.config.max_wait_after_idle_sec} s)${reason ? `: ${reason}` : ''}`;
        this.sendCallback(run, 'gate_timeout', run.idle_seen_at as string, run.gate_reason, verdict.metrics);
        return;
    }
  }

  /** An agent whose processes are all gone without idle, stop, end or a question has died: report it once. */
  private checkSilentExit(run: GateRun): void {
    if (run.processes_alive || run.processes_exited_at === null) return;
    const goneForMs = Date.now() - Date.parse(run.processes_exited_at);
    if (goneForMs < this.config.sample_interval_sec * 1000) return;
    run.gate_state = 'error';
    run.gate_reason = 'every tracked process exited before the agent reported idle, stop or end';
    this.sendCallback(run, 'gate_error', run.processes_exited_at, run.gate_reason);
  }

  private reapStale(run: GateRun, table: ProcessInfo[], sample: TelemetrySample): void {
    if (!this.config.stale_project_process_reaper_enabled) return;
    const victims = selectStaleProcesses(table, {
      projectDir: run.project_dir,
      nowMs: sample.at_ms,
      btimeSec: this.btimeSec,
      ticksPerSec: this.ticksPerSec,
      graceSec: this.config.stale_project_process_grace_sec,
      markers: this.config.stale_project_process_command_markers,
      gpuPids: sample.gpu_compute_pids,
      cmdlineOf: (pid) => readCmdline(pid),
      excludePids: [process.pid, process.ppid],
    }).filter((proc) => !this.reaping.has(proc.pid));
    if (victims.length === 0) return;
    for (const victim of victims) this.reaping.add(victim.pid);
    const commands = new Map(victims.map((proc) => [proc.pid, (readCmdline(proc.pid) ?? [proc.comm]).join(' ').slice(0, 300)]));
    void reapProcesses(victims, { termGraceSec: this.config.stale_project_process_term_grace_sec })
      .then((outcomes) => {
        const at = isoNow();
        for (const outcome of outcomes) {
          const command = commands.get(outcome.pid) ?? '';
          run.reaped.push({ pid: outcome.pid, outcome: outcome.outcome, at, command });
          this.events.append('stale_process_reaped', run.run_id, { pid: outcome.pid, outcome: outcome.outcome, command, ...(outcome.error ? { error: outcome.error } : {}) });
          this.logger.warn({ run_id: run.run_id, pid: outcome.pid, outcome: outcome.outcome, command }, 'stale project process reaped');
        }
        this.runs.save(run);
      })
      .catch((error: Error) => this.logger.error({ err: error, run_id: run.run_id }, 'reaping failed'))
      .finally(() => {
        for (const victim of victims) this.reaping.delete(victim.pid);
      });
  }

  // ---- helpers ----------------------------------------------------------------------------------------------

  private sendCallback(
    run: GateRun,
    eventType: CallbackEventType,
    observedAt: string,
    reason: string,
    quietWindow: QuietWindowMetrics | null = null,
    evidence: RunEvidence | null = null,
  ): string {
    const key = callbackIdempotencyKey(run.run_id, eventType, observedAt);
    const sample = this.latestSample();
    const payload: WorkerCallback = {
      event_type: eventType,
      run_id: run.run_id,
      session_id: run.session_id,
      project_id: run.project_id,
      gate_state: run.gate_state,
      reason,
      idle_seen_at: run.idle_seen_at,
      seen_at: isoNow(),
      delivered_at: null,
      telemetry: {
        cpu_pct: sample?.cpu_pct ?? null,
        gpu_pct: sample?.gpu_pct ?? null,
        vram_used_mib: sample?.vram_used_mib ?? null,
        vram_baseline_mib: run.vram_baseline_mib,
        memory_available_mib: sample?.memory_available_mib ?? null,
        gpu_source: sample?.gpu_source ?? 'none',
        quiet_window: quietWindow
          ? {
              samples_needed: quietWindow.samples_needed,
              samples_in_window: quietWindow.samples_in_window,
              mean_cpu_pct: quietWindow.mean_cpu_pct,
              mean_gpu_pct: quietWindow.mean_gpu_pct,
              peak_gpu_pct: quietWindow.peak_gpu_pct,
              vram_delta_mib: quietWindow.vram_delta_mib,
              gpu_present: quietWindow.gpu_present,
            }
          : null,
      },
      process_tracking: {
        root_pid: run.root_pid,
        process_group_id: run.process_group_id,
        tmux_session: run.tmux_session,
        root_alive: run.root_alive,
        alive_pids: run.alive_pids,
        reaped_pids: run.reaped.map((entry) => entry.pid),
      },
      question: run.question,
      evidence,
      idempotency_key: key,
    };
    if (this.outbox.enqueue(payload)) {
      run.callbacks.push({ event_type: eventType, idempotency_key: key, enqueued_at: payload.seen_at });
      this.events.append('callback_queued', run.run_id, { event_type: eventType, idempotency_key: key, gate_state: run.gate_state });
    }
    return key;
  }

  private profileFor(workloadClass: WorkloadClass): GateThresholdProfile {
    return resolveWorkloadProfile(workloadClass, this.config, this.config.workload_profiles);
  }

  private latestSample(): TelemetrySample | undefined {
    return this.samples.at(-1);
  }

  private adoptRoot(run: GateRun, rootPid: number | null): void {
    if (rootPid === null) return;
    run.root_pid = rootPid;
    const root = readProcessStat(rootPid);
    if (root) {
      run.root_start_ticks = root.startTicks;
      run.known_pids.push({ pid: root.pid, startTicks: root.startTicks });
    }
  }

  private markInterruptedDispatch(run: GateRun): void {
    run.dispatch_status = 'interrupted';
    run.gate_state = 'error';
    run.gate_reason = 'the gate stopped while the dispatch script ran; the agent may or may not have started';
    this.runs.save(run);
    this.events.append('dispatch_interrupted', run.run_id, { reason: run.gate_reason });
  }

  private findRunForEvent(event: ControlPlaneEvent): GateRun | undefined {
    if (event.run_id) return this.runs.get(event.run_id);
    const candidates = this.runs.all().sort((a, b) => b.dispatched_at.localeCompare(a.dispatched_at));
    if (event.session_id) {
      const bySession = candidates.find((run) => run.session_id === event.session_id);
      if (bySession) return bySession;
    }
    if (event.project_id) return candidates.find((run) => run.project_id === event.project_id && !SETTLED_GATE_STATES.has(run.gate_state));
    return undefined;
  }

  private dispatchResponse(run: GateRun, alreadyDispatched: boolean): DispatchResponse {
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
    };
  }

  private runView(run: GateRun) {
    const { request_hash: _hash, known_pids: _known, ...view } = run;
    return { ...view, samples_needed: samplesNeeded(this.profileFor(run.workload_class), this.config.sample_interval_sec) };
  }
}
