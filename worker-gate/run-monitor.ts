import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { RunEvidence } from './contract/callback-body.ts';
import type { ControlPlaneEvent } from './contract/gate-endpoints.ts';
import { RUN_OVER_GATE_STATES, type TelemetrySample } from './contract/gate-names.ts';
import { isAwaitingQuietWindow } from './domain/gate-lifecycle.ts';
import {
  adoptRoot,
  applyRunEvent,
  recordCallback,
  recordProgress,
  recordReaped,
  type CallbackIntent,
  type GateRun,
  type Transition,
} from './domain/gate-run.ts';
import { acceptsAgentEvents, findRunForEvent } from './domain/gate-run-lookup.ts';
import {
  detectSilentExit,
  detectStall,
  isWatched,
  observeProcesses,
  settleQuietWindow,
} from './domain/gate-run-watch.ts';
import { evaluateQuietWindow, toWindowSample, type WindowSample } from './domain/quiet-window.ts';
import { pinnedMachineGpuUse, showsWork, type RunCpuUsage } from './domain/run-machine-share.ts';
import { quietWindowWait } from './domain/quiet-window-wait.ts';
import { WORKLOAD_CLASSES } from './contract/workload.ts';
import type { CallbackOutbox } from './callback-outbox.ts';
import { buildCallbackPayload } from './callback-payload.ts';
import { checkAgentNamedPid } from './agent-named-pid.ts';
import { inspectEvidence } from './evidence.ts';
import { budgetLeftOf, continuationsOf, continuationVerdict, missingEvidence } from './domain/evidence-gaps.ts';
import { usageLimitWait } from './domain/usage-limit-wait.ts';
import { profileFor, stallAfterSecFor, type WorkerGateConfig } from './gate-config.ts';
import type { GateEventLog } from './gate-event-log.ts';
import { clockTicksPerSecond, readCmdline, readProcessTable, type ProcessInfo } from './process-table.ts';
import { findTrackedProcesses, trackingTargetOf } from './process-tracking.ts';
import type { RunRecords } from './run-records.ts';
import { reopenRunCgroup, stopAndRemove } from './run-cgroups/index.ts';
import { stopRunProcesses } from './run-stop.ts';
import { reapProcesses, selectStaleProcesses } from './stale-reaper.ts';
import { parseProcStat } from './telemetry/proc-parsers.ts';
import { processCpuUsage, RunUsageMeter } from './telemetry/run-usage.ts';
import { TelemetrySampler, type GpuInventory, type LastGpuReading } from './telemetry/sampler.ts';

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

export interface RunMonitorOptions {
  config: WorkerGateConfig;
  logger: Logger;
  runs: RunRecords;
  events: GateEventLog;
  outbox: CallbackOutbox;
  /**
   * Resumes a run whose session ended without its evidence (docs/worker-gate.md#continuing-a-premature-stop); absent,
   * such a run is judged as it is.
   */
  continueSession?: (run: GateRun, missing: readonly string[]) => Promise<unknown>;
}

/** Between the CPU counters read at start-up and the first sample: long enough for a meaningful percentage. */
const FIRST_CPU_INTERVAL_MS = 250;

/** How the sampling loop is doing, for /dashboard/api. */
export interface SamplingHealth {
  lastTickError: string | null;
  samples: number;
  /** CPU time spent sampling (telemetry, /proc scan, evaluation), so operators can see what the gate costs. */
  cpuMs: number;
}

const isoNow = () => new Date().toISOString();

/** A change of these fields is written at once; the other sampling details wait in memory for the next write. */
const persistedView = (run: GateRun) => JSON.stringify([run.gate_state, run.gate_reason, run.alive_pids, run.root_alive]);

/**
 * Follows dispatched runs: applies the agent's lifecycle events, samples telemetry and the process table every
 * `sample_interval_sec`, decides when a run is ready (quiet window), timed out or died, reaps stale project
 * processes, and queues one callback per observation in the outbox.
 */
export class RunMonitor {
  private readonly sampler = new TelemetrySampler();
  private readonly samples: TelemetrySample[] = [];
  /** The GPU query behind each of `samples`, at the same place: a run given GPUs is judged on its own rows of it. */
  private readonly sampleGpus: LastGpuReading[] = [];
  private readonly reaping = new Set<number>();
  private readonly releasingCgroups = new Set<string>();
  private readonly ticksPerSec = clockTicksPerSecond();
  private readonly btimeSec: number;
  private readonly maxSamplesKept: number;
  private readonly runUsage: RunUsageMeter;
  private readonly health: SamplingHealth = { lastTickError: null, samples: 0, cpuMs: 0 };
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = false;

  private readonly options: RunMonitorOptions;

  constructor(options: RunMonitorOptions) {
    this.options = options;
    this.btimeSec = parseProcStat(readFileSync('/proc/stat', 'utf8'))?.btimeSec ?? 0;
    const longestSustain = Math.max(...WORKLOAD_CLASSES.map((cls) => profileFor(options.config, cls).idle_sustain_sec));
    this.maxSamplesKept = Math.ceil(longestSustain / options.config.sample_interval_sec) + 10;
    this.runUsage = new RunUsageMeter(this.maxSamplesKept);
  }

  /**
   * Takes the first sample, then samples every `sample_interval_sec`. The CPU counters are read a moment before the
   * first sample, so the first snapshot after the gate reports ready already carries a CPU figure.
   */
  async start(): Promise<void> {
    if (this.sampler.primeCpu()) await delay(FIRST_CPU_INTERVAL_MS);
    await this.tick();
    this.timer = setInterval(() => void this.tick(), this.options.config.sample_interval_sec * 1000);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.ticking;
  }

  latestSample(): TelemetrySample | undefined {
    return this.samples.at(-1);
  }

  /** The GPU query behind the latest sample, per GPU and per process. */
  latestGpuReading(): LastGpuReading {
    return this.sampleGpus.at(-1) ?? { kind: 'none' };
  }

  /** The machine's GPUs as nvidia-smi last listed them (asked now when no sample had an answer yet). */
  gpuInventory(): Promise<GpuInventory> {
    return this.sampler.gpuInventory();
  }

  /** The machine's GPUs as nvidia-smi last listed them; null while no query has answered. */
  knownGpuInventory(): GpuInventory | null {
    return this.sampler.knownGpuInventory();
  }

  samplingHealth(): Readonly<SamplingHealth> {
    return this.health;
  }

  /** Applies a lifecycle event from the agent runtime. Events for runs the gate does not know are recorded and ignored. */
  recordEvent(event: ControlPlaneEvent): EventResponse {
    const { runs, events } = this.options;
    const receivedAt = isoNow();
    const found = findRunForEvent(runs.all(), event);
    const summary = { event: event.event, session_id: event.session_id ?? null, project_id: event.project_id ?? null, agent_timestamp: event.timestamp ?? null };
    if (!found) {
      events.append('lifecycle_event', event.run_id ?? null, { ...summary, ignored: true, ignore_reason: 'unknown run' });
      return { ok: true, recorded: true, run_id: event.run_id ?? null, ignored: true, ignore_reason: 'unknown run', callbacks: [] };
    }
    if (event.event === 'progress') return this.recordProgress(found, event, receivedAt);
    const applied = applyRunEvent(found, {
      event: event.event,
      session_id: event.session_id,
      question: event.question,
      question_detail: event.question_detail,
      message: event.message,
      received_at: receivedAt,
      tmux_session: event.tmux_session,
      exit_code: event.exit_code,
      token_usage: event.token_usage,
      cause: event.cause,
      token_budget_exceeded:
        event.token_budget_exceeded === undefined ? undefined : { budget: event.token_budget_exceeded, tokens_used: event.token_usage?.total_tokens ?? 0 },
      usage_limit:
        event.event === 'session-end' && event.cause?.kind === 'usage_limit'
          ? usageLimitWait(found, { cause: event.cause, sessionTokens: event.token_usage?.total_tokens ?? 0, now: new Date(receivedAt), backoffSec: this.options.config.usage_limit_backoff_sec, holdSec: this.options.config.usage_limit_hold_sec })
          : undefined,
    });
    const { outcome } = applied;
    let run = applied.run;
    if (run.root_pid === null && event.root_pid) run = this.adoptNamedRoot(run, event.root_pid);

    const keys: string[] = [];
    for (const { event_type, observed_at } of outcome.callbacks) {
      const sent = this.sendCallback(run, { event_type, observed_at, reason: outcome.session.gate_reason, quiet_window: null, with_evidence: false });
      run = sent.run;
      keys.push(sent.key);
    }
    run = runs.save(run);
    events.append('lifecycle_event', run.run_id, {
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

  /** A sign of progress changes no state: it restarts the run's stall clock and carries the usage seen so far. */
  private recordProgress(run: GateRun, event: ControlPlaneEvent, receivedAt: string): EventResponse {
    const settled = !acceptsAgentEvents(run);
    if (!settled) this.options.runs.save(recordProgress(run, receivedAt, event.token_usage));
    return { ok: true, recorded: true, run_id: run.run_id, ignored: settled, ...(settled ? { ignore_reason: `gate already settled in state ${run.gate_state}` } : {}), gate_state: run.gate_state, callbacks: [] };
  }

  /** Takes the pid the agent names as the run's root only where it is the run's own process (agent-named-pid.ts). */
  private adoptNamedRoot(run: GateRun, pid: number): GateRun {
    const verdict = checkAgentNamedPid(pid, run);
    if (verdict.ok) return adoptRoot(run, pid, verdict.process);
    this.options.events.append('agent_pid_refused', run.run_id, { root_pid: pid, reason: verdict.reason });
    this.options.logger.warn({ run_id: run.run_id, root_pid: pid, reason: verdict.reason }, 'root_pid named by the agent refused');
    return run;
  }

  private tick(): Promise<void> {
    if (this.ticking || this.stopped) return this.ticking ?? Promise.resolve();
    const cpuBefore = process.cpuUsage();
    this.ticking = this.observe()
      .then(() => {
        this.health.lastTickError = null;
        const used = process.cpuUsage(cpuBefore);
        this.health.samples += 1;
        this.health.cpuMs += (used.user + used.system) / 1000;
      })
      .catch((error: Error) => {
        this.health.lastTickError = error.message;
        this.options.logger.error({ err: error }, 'gate sampling failed');
      })
      .finally(() => {
        this.ticking = undefined;
      });
    return this.ticking;
  }

  private async observe(): Promise<void> {
    const sample = await this.sampler.sample();
    this.samples.push(sample);
    this.sampleGpus.push(this.sampler.lastGpuReading());
    if (this.samples.length > this.maxSamplesKept) {
      this.samples.splice(0, this.samples.length - this.maxSamplesKept);
      this.sampleGpus.splice(0, this.sampleGpus.length - this.maxSamplesKept);
    }
    this.releaseEndedRunCgroups();
    const watched = this.options.runs.all().filter(isWatched);
    this.runUsage.keepOnly(new Set(watched.map((run) => run.run_id)));
    if (watched.length === 0) return;
    const table = readProcessTable({ withCwd: true });
    for (const run of watched) this.observeRun(run, table, sample);
  }

  private observeRun(before: GateRun, table: ProcessInfo[], sample: TelemetrySample): void {
    const tracked = findTrackedProcesses(table, trackingTargetOf(before));
    let run = observeProcesses(before, {
      alive: tracked.alive.filter((proc) => proc.pid !== process.pid),
      rootAlive: tracked.rootAlive,
      at: new Date(sample.at_ms).toISOString(),
    });
    const usage = this.runUsage.record(run.run_id, sample.at_ms, this.cpuUsageOf(run, tracked.alive), this.sampler.lastGpuReading(), run.alive_pids, run.gpu_indices ?? null);
    if (run.gate_state === 'running' && showsWork(usage, profileFor(this.options.config, run.workload_class))) run = recordProgress(run, new Date(sample.at_ms).toISOString(), undefined);

    if (!run.root_alive && run.processes_alive) this.reapStale(run, table, sample);

    const transition = isAwaitingQuietWindow(run) ? this.evaluateWindow(run, sample) : this.detectEnd(run);
    run = transition.run;
    if (run.cause?.kind === 'stall' && before.gate_state === 'running') this.stopStalled(run);
    if (transition.callback) {
      const evidence = transition.callback.with_evidence ? inspectEvidence(this.options.config.project_root, run.project_dir) : null;
      run = (evidence && this.continueIfPremature(run, transition.callback, evidence)) ?? this.sendCallback(run, transition.callback, evidence).run;
    }

    if (persistedView(run) !== persistedView(before)) this.options.runs.save(run);
    else this.options.runs.keep(run);
  }

  /**
   * A session ready to be judged without the evidence its prompt asks for is continued, while agent_continue_limit and
   * the run's token budget allow (docs/worker-gate.md#continuing-a-premature-stop): the control plane hears
   * session_continued instead of readiness, and the gate watches the continued session. Null: the run is judged now.
   */
  private continueIfPremature(run: GateRun, ready: CallbackIntent, evidence: RunEvidence): GateRun | null {
    const { config, runs, logger } = this.options;
    if (!this.options.continueSession) return null;
    const missing = missingEvidence(evidence);
    const continuations = continuationsOf(run);
    const verdict = continuationVerdict({ missing, continuationsSoFar: continuations, limit: config.agent_continue_limit, budgetLeft: budgetLeftOf(run) });
    if (!verdict.continue) return null;
    const reason = `the session ended without its evidence (${missing.length} missing); continuing it, ${continuations + 1} of ${config.agent_continue_limit}`;
    const continuing = this.sendCallback(
      { ...run, gate_state: 'running', gate_reason: reason, dispatch_status: 'starting' },
      { event_type: 'session_continued', observed_at: ready.observed_at, reason: `${reason}: ${missing.join('; ')}`, quiet_window: ready.quiet_window, with_evidence: true },
      evidence,
    ).run;
    // Saved before the continued session starts: the relaunch reads the run's record.
    runs.save(continuing);
    logger.info({ run_id: run.run_id, missing }, 'premature stop: continuing the session');
    void this.options.continueSession(continuing, missing).catch((error: Error) => this.continuationFailed(run.run_id, error));
    return runs.get(run.run_id) ?? continuing;
  }

  /** A continued session that could not start ends the run in error, with one gate_error. */
  private continuationFailed(runId: string, error: Error): void {
    const current = this.options.runs.get(runId);
    if (!current) return;
    const reason = `the continued session could not start: ${error.message}`;
    this.options.logger.warn({ run_id: runId, err: error }, 'premature stop: the continuation failed');
    const failed: GateRun = { ...current, dispatch_status: 'started', gate_state: 'error', gate_reason: reason };
    this.options.runs.save(this.sendCallback(failed, { event_type: 'gate_error', observed_at: isoNow(), reason, quiet_window: null, with_evidence: false }).run);
  }

  /** A running agent whose processes all exited has died; one whose processes live but show no progress has stalled. */
  private detectEnd(run: GateRun): Transition {
    const { config } = this.options;
    const exited = detectSilentExit(run, Date.now(), config.sample_interval_sec);
    if (exited.callback) return exited;
    return detectStall(run, Date.now(), stallAfterSecFor(config, run.workload_class));
  }

  /**
   * Stops every process of a stalled run; what was stopped goes into the run's record, which the dashboard shows. A
   * run with a cgroup is stopped with it, as every ended run is (releaseEndedRunCgroups); one without, by its tracked
   * processes.
   */
  private stopStalled(run: GateRun): void {
    const { config, runs, events, logger } = this.options;
    logger.warn({ run_id: run.run_id, reason: run.gate_reason }, 'stalled run stopped');
    if (run.cgroup) return;
    void stopRunProcesses(run, config.stale_project_process_term_grace_sec, 'stalled run')
      .then((stopped) => {
        events.append('stalled_run_stopped', run.run_id, { reason: run.gate_reason, stopped: stopped.map(({ pid, outcome }) => ({ pid, outcome })) });
        runs.save(recordReaped(runs.get(run.run_id) ?? run, stopped));
      })
      .catch((error: Error) => logger.error({ err: error, run_id: run.run_id }, 'stopping a stalled run failed'));
  }

  /**
   * Every end of a run (ready, error, timeout, stall, cancel, a failed end event) stops the whole of its cgroup and
   * removes it: whatever the run left behind goes with it, and only the run's own processes are signalled.
   */
  private releaseEndedRunCgroups(): void {
    const { runs, events, logger } = this.options;
    for (const run of runs.all()) {
      if (!run.cgroup || !RUN_OVER_GATE_STATES.has(run.gate_state) || this.releasingCgroups.has(run.run_id)) continue;
      if (!run.cgroup.paths.some((path) => existsSync(path))) continue;
      const cgroup = reopenRunCgroup(run.cgroup);
      const members = cgroup.pids();
      this.releasingCgroups.add(run.run_id);
      void stopAndRemove(cgroup)
        .then(({ killed }) => {
          events.append('run_cgroup_removed', run.run_id, { killed, paths: run.cgroup?.paths ?? [], gate_state: run.gate_state });
          if (members.length === 0) return;
          logger.info({ run_id: run.run_id, killed }, 'the ended run\'s leftover processes were stopped with its cgroup');
          const at = isoNow();
          runs.save(recordReaped(runs.get(run.run_id) ?? run, members.map((pid) => ({ pid, outcome: 'killed', at, command: 'left in the cgroup of an ended run' }))));
        })
        .catch((error: Error) => logger.error({ err: error, run_id: run.run_id }, 'stopping an ended run\'s cgroup failed'))
        .finally(() => this.releasingCgroups.delete(run.run_id));
    }
  }

  /** The run's CPU counter: its cgroup's, which keeps the time of exited processes too, else its live processes'. */
  private cpuUsageOf(run: GateRun, alive: readonly ProcessInfo[]): RunCpuUsage {
    const usec = run.cgroup ? reopenRunCgroup(run.cgroup).cpuUsageUsec() : null;
    return usec === null ? processCpuUsage(alive, this.ticksPerSec) : { kind: 'cgroup', usec };
  }

  private evaluateWindow(run: GateRun, sample: TelemetrySample): Transition {
    const { config } = this.options;
    const profile = profileFor(config, run.workload_class);
    // Judged on the run: its own samples, and VRAM its own processes hold (none at dispatch). Else the machine's, of
    // which a run given GPUs reads only its own.
    const ownUse = config.quiet_window_scope === 'run';
    const verdict = evaluateQuietWindow({
      profile,
      sampleIntervalSec: config.sample_interval_sec,
      samples: ownUse ? this.runUsage.samples(run.run_id) : this.machineSamplesFor(run),
      vramBaselineMib: ownUse ? 0 : run.vram_baseline_mib,
      idleSeenAtMs: Date.parse(run.idle_seen_at as string),
      processesAlive: run.processes_alive,
      lastProcessAliveAtMs: run.last_process_alive_at ? Date.parse(run.last_process_alive_at) : null,
      nowMs: sample.at_ms,
      maxWaitAfterIdleSec: config.max_wait_after_idle_sec,
    });
    const settled = settleQuietWindow(run, verdict, { idleSustainSec: profile.idle_sustain_sec, maxWaitAfterIdleSec: config.max_wait_after_idle_sec });
    // How long the run has waited, so every view can say so and a run waiting far too long shows as needing a person.
    const wait = quietWindowWait({ scope: config.quiet_window_scope, idleSeenAtMs: Date.parse(run.idle_seen_at as string), nowMs: sample.at_ms, idleSustainSec: profile.idle_sustain_sec, ready: verdict.verdict === 'ready' });
    return { ...settled, run: { ...settled.run, quiet_window: { ...settled.run.quiet_window, ...wait } } };
  }

  /** The machine's samples as a run's window in the machine's scope reads them: a run given GPUs sees only those. */
  private machineSamplesFor(run: GateRun): WindowSample[] {
    const gpuIndices = run.gpu_indices ?? null;
    if (gpuIndices === null) return this.samples.map(toWindowSample);
    return this.samples.map((sample, i) => ({
      at_ms: sample.at_ms,
      cpu_pct: sample.cpu_pct,
      ...pinnedMachineGpuUse(this.sampleGpus[i] ?? { kind: 'failed' }, gpuIndices),
    }));
  }

  private reapStale(run: GateRun, table: ProcessInfo[], sample: TelemetrySample): void {
    const { config, runs, events, logger } = this.options;
    if (!config.stale_project_process_reaper_enabled) return;
    // With a cgroup, the run's leftovers are its cgroup's members wherever they work; without one, the project's.
    const members = run.cgroup ? new Set(run.alive_pids) : null;
    const victims = selectStaleProcesses(members ? table.filter((proc) => members.has(proc.pid)) : table, {
      projectDir: members ? '/' : run.project_dir,
      nowMs: sample.at_ms,
      btimeSec: this.btimeSec,
      ticksPerSec: this.ticksPerSec,
      graceSec: config.stale_project_process_grace_sec,
      markers: config.stale_project_process_command_markers,
      gpuPids: sample.gpu_compute_pids,
      cmdlineOf: (pid) => readCmdline(pid),
      excludePids: [process.pid, process.ppid],
    }).filter((proc) => !this.reaping.has(proc.pid));
    if (victims.length === 0) return;
    for (const victim of victims) this.reaping.add(victim.pid);
    const commands = new Map(victims.map((proc) => [proc.pid, (readCmdline(proc.pid) ?? [proc.comm]).join(' ').slice(0, 300)]));
    void reapProcesses(victims, { termGraceSec: config.stale_project_process_term_grace_sec })
      .then((outcomes) => {
        const at = isoNow();
        const reaped = outcomes.map((outcome) => ({ pid: outcome.pid, outcome: outcome.outcome, at, command: commands.get(outcome.pid) ?? '' }));
        for (const outcome of outcomes) {
          const command = commands.get(outcome.pid) ?? '';
          events.append('stale_process_reaped', run.run_id, { pid: outcome.pid, outcome: outcome.outcome, command, ...(outcome.error ? { error: outcome.error } : {}) });
          logger.warn({ run_id: run.run_id, pid: outcome.pid, outcome: outcome.outcome, command }, 'stale project process reaped');
        }
        // The run has moved on while its processes were signalled: record on its latest state.
        runs.save(recordReaped(runs.get(run.run_id) ?? run, reaped));
      })
      .catch((error: Error) => logger.error({ err: error, run_id: run.run_id }, 'reaping failed'))
      .finally(() => {
        for (const victim of victims) this.reaping.delete(victim.pid);
      });
  }

  /**
   * Queues the callback in the outbox and notes it on the run. The outbox refuses a key it already holds, so an
   * observation repeated (or replayed after a restart) is reported once.
   */
  private sendCallback(run: GateRun, callback: CallbackIntent, evidence: RunEvidence | null = null): { run: GateRun; key: string } {
    const payload = buildCallbackPayload({ run, callback, sample: this.latestSample(), evidence, seenAt: isoNow() });
    const key = payload.idempotency_key;
    if (!this.options.outbox.enqueue(payload)) return { run, key };
    this.options.events.append('callback_queued', run.run_id, { event_type: callback.event_type, idempotency_key: key, gate_state: run.gate_state });
    return { run: recordCallback(run, { event_type: callback.event_type, idempotency_key: key, enqueued_at: payload.seen_at }), key };
  }
}
