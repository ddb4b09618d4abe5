import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ControlPlaneEvent, DispatchRequest, PrepareProjectRequest, ResumeRunRequest } from './contract/gate-endpoints.ts';
import { RUN_OVER_GATE_STATES, SETTLED_GATE_STATES } from './contract/gate-names.ts';
import { acceptsAgentEvents } from './domain/gate-run-lookup.ts';
import { sha256Hex, tokensMatch } from '../platform/http/tokens.ts';
import { CallbackOutbox } from './callback-outbox.ts';
import { dashboardBody } from './dashboard.ts';
import { GateDispatcher, type CancelResponse, type DispatchResponse } from './dispatcher.ts';
import { RunResumer, type ResumeResponse } from './run-resumer.ts';
import { profileFor, type WorkerGateConfig } from './gate-config.ts';
import { WORKLOAD_CLASSES } from './contract/workload.ts';
import { GateEventLog } from './gate-event-log.ts';
import { agentReachProblems } from './launchers/state-placement.ts';
import type { PrepareResult } from './prepare-project.ts';
import { RunMonitor, type EventResponse } from './run-monitor.ts';
import { CancelsBeforeDispatch, RunRecords } from './run-records.ts';
import { RunCgroupHost, type RunCgroupsStatus } from './run-cgroups/index.ts';
import { AgentSandbox } from './agent-sandbox/index.ts';
import { capacityReport } from './capacity.ts';
import { listRunFiles, readRunFile } from './run-files.ts';
import type { GateRun } from './domain/gate-run.ts';
import { HttpError } from '../platform/http/errors.ts';
import type { RunFileContent, RunFiles } from './contract/run-files.ts';
import type { AgentIsolation } from './contract/agent-isolation.ts';
import { LAUNCHED_RUNTIMES, type LaunchedRuntime } from './contract/agent-runtimes.ts';
import type { TranscriptDraft } from './contract/run-transcript.ts';
import type { AgentStart } from './agent-start.ts';
import { RunTranscripts, transcriptUrlBeside } from './transcripts/run-transcripts.ts';
import { credentialValues } from './transcripts/secret-redactor.ts';

export type { CancelResponse, DispatchResponse } from './dispatcher.ts';
export type { EventResponse } from './run-monitor.ts';
export type { WorkerGateConfig } from './gate-config.ts';

export interface WorkerGateOptions {
  config: WorkerGateConfig;
  logger: Logger;
  /** This gate's `/legacy-agent/event` URL as agents on this machine reach it; known once the server listens. */
  eventUrl: () => string;
}

/**
 * The worker-machine service: prepares workspaces, runs the dispatch script, follows the agent's lifecycle events,
 * tracks its processes and the machine's telemetry, and reports readiness through a durable callback outbox.
 * It wires the dispatcher (start and stop agents) and the run monitor (events, sampling, callbacks) to the records
 * they share.
 */
export class WorkerGate {
  private readonly config: WorkerGateConfig;
  private readonly logger: Logger;
  private readonly runs: RunRecords;
  private readonly cancelsBeforeDispatch: CancelsBeforeDispatch;
  private readonly events: GateEventLog;
  private readonly outbox: CallbackOutbox;
  private readonly transcripts: RunTranscripts;
  private readonly dispatcher: GateDispatcher;
  private readonly resumer: RunResumer;
  private readonly monitor: RunMonitor;
  private readonly cgroups: RunCgroupHost;
  private readonly sandbox: AgentSandbox;
  private readonly startedAt = new Date().toISOString();
  private stopped = false;
  private ready = false;

  constructor(options: WorkerGateOptions) {
    this.config = options.config;
    this.logger = options.logger.child({ component: 'worker-gate' });
    const dir = join(this.config.state_dir, 'worker-gate');
    this.runs = new RunRecords(join(dir, 'runs'), this.logger);
    this.cancelsBeforeDispatch = new CancelsBeforeDispatch(join(dir, 'cancelled-before-dispatch.json'), this.logger);
    this.events = new GateEventLog(join(dir, 'events.jsonl'), this.config.log_events);
    this.outbox = new CallbackOutbox({
      dir: join(dir, 'outbox'),
      urls: [this.config.completion_callback_url, ...this.config.completion_callback_fallback_urls],
      token: this.config.completion_callback_token,
      timeoutSec: this.config.completion_callback_timeout_sec,
      logger: this.logger,
      onDelivered: (entry) =>
        this.events.append('callback_delivered', entry.run_id, { event_type: entry.event_type, idempotency_key: entry.idempotency_key, attempts: entry.attempts }),
      onQueued: (payload) => this.transcripts.append(payload.run_id, [{ kind: 'lifecycle', tool: null, text: `the gate reports ${payload.event_type}: ${payload.reason}` }]),
    });
    const callbackUrls = [this.config.completion_callback_url, ...this.config.completion_callback_fallback_urls];
    this.transcripts = new RunTranscripts({
      dir: join(dir, 'transcripts'),
      urls: callbackUrls.map(transcriptUrlBeside),
      token: this.config.completion_callback_token,
      timeoutSec: this.config.completion_callback_timeout_sec,
      logger: this.logger,
      secrets: [this.config.completion_callback_token, this.config.worker_wake_gate_bearer_token ?? '', ...credentialValues(process.env, this.config.agent_credential_env)],
      runOf: (runId) => this.runs.get(runId),
    });
    this.cgroups = RunCgroupHost.detect(this.config);
    this.sandbox = AgentSandbox.detect(this.config);
    // The gate's records must be out of every agent's reach, or the gate does not start (docs/security.md#security-model).
    const exposed = agentReachProblems(this.config, { isolated: this.sandbox.report().sandboxed });
    if (exposed.length > 0) throw new Error(`the worker gate refuses to start: ${exposed.join('; ')}`);
    const shared = { config: this.config, logger: this.logger, runs: this.runs, events: this.events };
    const launching = (runId: string, start: AgentStart) => this.followToolStream(runId, start);
    this.resumer = new RunResumer({ ...shared, eventUrl: options.eventUrl, sandbox: this.sandbox, launching });
    this.monitor = new RunMonitor({ ...shared, outbox: this.outbox, continueSession: (run, missing) => this.resumer.continueSession(run, missing) });
    this.dispatcher = new GateDispatcher({
      ...shared,
      cancelsBeforeDispatch: this.cancelsBeforeDispatch,
      eventUrl: options.eventUrl,
      latestSample: () => this.monitor.latestSample(),
      latestGpuReading: () => this.monitor.latestGpuReading(),
      gpuInventory: () => this.monitor.gpuInventory(),
      cgroups: this.cgroups,
      sandbox: this.sandbox,
      launching,
    });
  }

  /** A run started under a real tool: its transcript follows the stream the gate's runner keeps of it. */
  private followToolStream(runId: string, start: AgentStart): void {
    const runtime = start.env.AGENT_RUNTIME;
    const records = start.env.AGENT_RECORDS;
    if (records && LAUNCHED_RUNTIMES.includes(runtime as LaunchedRuntime)) this.transcripts.launched(runId, runtime as LaunchedRuntime, records);
  }

  /** The quiet window each workload class waits out before a run counts as finished, as the profiles in force set it. */
  private reportQuietWindows(): void {
    const windows = Object.fromEntries(WORKLOAD_CLASSES.map((cls) => [cls, profileFor(this.config, cls).idle_sustain_sec]));
    const listed = Object.entries(windows).map(([cls, sec]) => `${cls} ${sec} s`).join(', ');
    this.logger.info({ quiet_window_sec: windows, scope: this.config.quiet_window_scope }, `quiet window (${this.config.quiet_window_scope} scope): ${listed}`);
  }

  /** Loads the records a previous process left, resumes tracking and resends pending callbacks, then samples. */
  async start(): Promise<void> {
    this.events.load();
    this.outbox.load();
    this.runs.load();
    this.transcripts.load();
    this.cancelsBeforeDispatch.load();
    this.dispatcher.recoverInterruptedDispatches();
    this.reportIsolation();
    await this.sweepRunCgroups();
    const resumed = this.runs.all().filter((run) => !SETTLED_GATE_STATES.has(run.gate_state));
    this.events.append('gate_started', null, { resumed_runs: resumed.map((run) => run.run_id), callbacks_pending: this.outbox.pendingCount() });
    this.logger.info({ resumed_runs: resumed.length, callbacks_pending: this.outbox.pendingCount() }, 'worker gate started');
    this.reportQuietWindows();
    this.outbox.start();
    this.transcripts.start();
    await this.monitor.start();
    this.ready = true;
  }

  /**
   * Says how runs are contained, then stops and removes the run cgroups a previous process left that no run still
   * going holds (the cgroups of runs that ended are released by the monitor's sweep).
   */
  private async sweepRunCgroups(): Promise<void> {
    const status = this.cgroups.status();
    if (status.mode === 'none') this.logger.warn({ run_cgroups: status }, `runs get no cgroup of their own: ${status.reason}`);
    else this.logger.info({ run_cgroups: status }, `each run gets its own cgroup (${status.mode}): ${status.reason}`);
    if (status.limits_unavailable.length > 0) this.logger.warn({ limits_unavailable: status.limits_unavailable }, 'some run limits cannot be applied');
    const kept = new Set(
      this.runs
        .all()
        .filter((run) => !RUN_OVER_GATE_STATES.has(run.gate_state))
        .flatMap((run) => run.cgroup?.paths ?? []),
    );
    const swept = await this.cgroups.sweep(kept);
    if (swept.length > 0) {
      this.events.append('run_cgroups_swept', null, { cgroups: swept });
      this.logger.warn({ cgroups: swept }, 'stopped and removed run cgroups no tracked run holds');
    }
  }

  /** Says plainly, at start, what an agent of this gate can see and who it runs as (docs/security.md#security-model). */
  private reportIsolation(): void {
    const isolation = this.sandbox.report();
    if (isolation.sandboxed) this.logger.info({ agent_isolation: isolation }, `agent isolation (${isolation.mode}): ${isolation.summary}`);
    else this.logger.warn({ agent_isolation: isolation }, `agent isolation (${isolation.mode}): ${isolation.summary}`);
  }

  /** How this gate confines its agents, as detected at its start. */
  agentIsolation(): AgentIsolation {
    return this.sandbox.report();
  }

  /** How each run is contained, as detected at start (docs/worker-gate.md#each-runs-own-cgroup). */
  runCgroups(): RunCgroupsStatus {
    return this.cgroups.status();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.monitor.stop();
    await this.outbox.stop();
    await this.transcripts.stop();
    this.cgroups.releaseParents();
  }

  isReady(): boolean {
    return this.ready && !this.stopped;
  }

  prepare(request: PrepareProjectRequest): PrepareResult {
    return this.dispatcher.prepare(request);
  }

  dispatch(request: DispatchRequest): Promise<DispatchResponse> {
    return this.dispatcher.dispatch(request);
  }

  cancel(runId: string): Promise<CancelResponse> {
    return this.dispatcher.cancel(runId);
  }

  resume(runId: string, request: ResumeRunRequest): Promise<ResumeResponse> {
    return this.resumer.resume(runId, request);
  }

  /** The run's result files (docs/worker-gate.md#a-runs-result-files); 404 for a run this gate does not hold. */
  runFiles(runId: string): Promise<RunFiles> {
    return listRunFiles(this.config.project_root, this.heldRun(runId));
  }

  runFile(runId: string, path: string): Promise<RunFileContent> {
    return readRunFile(this.config.project_root, this.heldRun(runId), path);
  }

  private heldRun(runId: string): GateRun {
    const run = this.runs.get(runId);
    if (!run) throw new HttpError(404, `this gate holds no run ${runId}`);
    return run;
  }

  /** An agent's event: the run monitor applies it, and the run's transcript records it (docs/runs.md#following-a-run-live). */
  recordEvent(event: ControlPlaneEvent): EventResponse {
    // Recorded before the monitor applies it, so the transcript says what the agent did before what the gate made of it.
    const run = event.run_id === undefined ? undefined : this.runs.get(event.run_id);
    if (run && acceptsAgentEvents(run)) this.transcripts.append(run.run_id, transcriptOfEvent(event));
    return this.monitor.recordEvent(event);
  }

  /**
   * The run whose agent holds `token` (its GATE_EVENT_TOKEN), while that run still takes agent events; undefined for
   * any other token. Compared in constant time, like every token.
   */
  runForAgentToken(token: string): string | undefined {
    const presented = sha256Hex(token);
    const owner = this.runs.all().find((run) => run.event_token_sha256 !== undefined && tokensMatch(presented, run.event_token_sha256));
    return owner && acceptsAgentEvents(owner) ? owner.run_id : undefined;
  }

  /** What `GET /metrics` reads from the gate at each scrape (docs/operations.md#metrics-and-observability). */
  metricsReadings(): { runsByGateState: Record<string, number>; samples: number; samplingCpuMs: number; outboxPending: number; runSlots: number; runSlotsHeld: number } {
    const runsByGateState: Record<string, number> = {};
    for (const run of this.runs.all()) runsByGateState[run.gate_state] = (runsByGateState[run.gate_state] ?? 0) + 1;
    const sampling = this.monitor.samplingHealth();
    return {
      runsByGateState,
      samples: sampling.samples,
      samplingCpuMs: sampling.cpuMs,
      outboxPending: this.outbox.pendingCount(),
      runSlots: this.config.run_slots,
      runSlotsHeld: this.dispatcher.slotHolders().length,
    };
  }

  /** What the gate holds and has free for runs (docs/worker-gate.md#slots-and-gpus), on the GPUs nvidia-smi last listed. */
  capacity() {
    return capacityReport({
      slots: this.config.run_slots,
      runGpus: this.config.run_gpus,
      holders: this.dispatcher.slotHolders(),
      inventory: this.monitor.knownGpuInventory(),
      cpuPinning: this.cgroups.cpuPinning(),
    });
  }

  /** Lists the machine's GPUs now where no query has answered yet, so the next capacity report has them if it can. */
  async readGpusIfUnknown(): Promise<void> {
    if (this.monitor.knownGpuInventory() === null) await this.monitor.gpuInventory();
  }

  dashboard(limit: number, eventLimit: number) {
    return dashboardBody({
      config: this.config,
      ready: this.isReady(),
      startedAt: this.startedAt,
      sampling: this.monitor.samplingHealth(),
      runCgroups: this.cgroups.status(),
      agentIsolation: this.sandbox.report(),
      latestSample: this.monitor.latestSample(),
      capacity: this.capacity(),
      runs: this.runs.all(),
      callbacksPending: this.outbox.pendingCount(),
      callbacks: this.outbox.list(),
      events: this.events.latest(eventLimit),
      limit,
    });
  }
}

/** What an agent's event adds to its run's transcript: a lifecycle line, or the entries a progress event carries. */
function transcriptOfEvent(event: ControlPlaneEvent): TranscriptDraft[] {
  if (event.event === 'progress') return (event.transcript ?? []).map((draft) => ({ ...draft, at: event.timestamp }));
  const said = event.event === 'ask-user-question' ? (event.question ?? event.message) : event.message;
  return [{ kind: 'lifecycle', tool: null, text: said ? `${event.event}: ${said}` : event.event }];
}
