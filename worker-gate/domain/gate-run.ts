/**
 * State changes of one run the worker gate dispatched (docs/worker-gate.md#worker-gate). Each function takes a record and
 * returns the next one; the gate's I/O modules apply them and persist the result.
 */
import type { TokenUsage } from '../contract/agent-runtimes.ts';
import { applyLifecycleEvent, freshSession, type GateSession, type LifecycleInput, type LifecycleOutcome } from './gate-lifecycle.ts';
import { type CallbackEventType, type DispatchMode, type ReasoningEffort } from '../contract/gate-names.ts';
import type { QuietWindowMetrics } from './quiet-window.ts';
import { exitStatusCause, reapedCause, type RunCause } from '../contract/run-cause.ts';
import type { WorkloadClass } from '../contract/workload.ts';

export interface TrackedPid {
  pid: number;
  startTicks: number;
}

/** A run's own cgroup as its record keeps it: the hierarchy and its directory in each (docs/worker-gate.md#worker-gate). */
export interface RunCgroupRecord {
  kind: 'v2' | 'v1';
  paths: string[];
}

/** Everything the gate knows about one dispatched run; one JSON file per run under state_dir. */
export interface GateRun extends GateSession {
  run_id: string;
  project_id: string;
  project_name: string;
  project_dir: string;
  prompt_file: string;
  workload_class: WorkloadClass;
  machine_target: string | null;
  mode: DispatchMode;
  model: string;
  reasoning_effort: ReasoningEffort;
  sandbox: string;
  /** The tokens the agent may spend before its launcher stops it; null: no limit. Absent from older records. */
  token_budget?: number | null;
  /** Hash of the dispatch request: a repeated /dispatch for this run must match it. */
  request_hash: string;
  /**
   * SHA-256 (hex) of the run's own agent event token, handed to its dispatch script as GATE_EVENT_TOKEN; the token
   * itself is never stored. Absent from records written before per-run tokens existed.
   */
  event_token_sha256?: string;
  /** `starting` while the dispatch script runs; a record left in that state means the gate died mid-dispatch. */
  dispatch_status: 'starting' | 'started' | 'interrupted';
  dispatched_at: string;
  dispatch_duration_ms: number | null;
  script_output: Record<string, unknown>;
  root_pid: number | null;
  root_start_ticks: number | null;
  process_group_id: number | null;
  tmux_session: string | null;
  /** The tokens the agent reported spending, with its last event that carried them; absent from older records. */
  token_usage?: TokenUsage | null;
  /**
   * The run's own cgroup, made before its dispatch script starts: every process in it is the run's, whatever session
   * or directory it takes. null where the gate has no cgroups; absent from older records.
   */
  cgroup?: RunCgroupRecord | null;
  /**
   * The agent's last sign of progress: any event it posted, or a model answer, tool event or usage change its runner
   * saw. A run that shows none for stall_after_sec is stopped. Absent from older records (the dispatch time counts).
   */
  last_progress_at?: string | null;
  /** Why the run ended, once the gate knows (worker-gate/contract/run-cause.ts); absent from older records. */
  cause?: RunCause | null;
  /**
   * The dispatch script as the gate started it (in a session of its own): a pid an agent names is taken as the root
   * only if it descends from this process or works in the project. Absent from records written before this existed.
   */
  dispatch_script?: TrackedPid | null;
  /**
   * The GPUs the run was given (nvidia-smi's indices): its agent sees only these and its quiet window reads only these;
   * [] gives it none. null: not pinned, it sees every GPU and holds none. Absent from older records.
   */
  gpu_indices?: number[] | null;
  /** The CPUs its cgroup is pinned to; null: not pinned. Absent from older records. */
  cpus?: number[] | null;
  /** Why a run whose dispatch asked for a cpu_count was not pinned (the gate has no cgroup cpuset); null otherwise. */
  cpus_unpinned_reason?: string | null;
  /** Each resume of the run's session by the control plane (an answer), oldest first; absent from older records. */
  resumes?: ResumeRecord[];
  /** Tools an answer allowed for the rest of the run: every later session of it may use them unasked. */
  allowed_tools?: string[];
  /** What the run's earlier sessions spent: a resumed session's tool reports its own, which adds to this. */
  tokens_before_session?: TokenUsage | null;
  /** VRAM in use when the run was dispatched: on its own GPUs where it was given some, else on every GPU. */
  vram_baseline_mib: number | null;
  /** Every process the gate has tracked for this run, with its start time, to tell a reused pid apart. */
  known_pids: TrackedPid[];
  alive_pids: number[];
  root_alive: boolean;
  processes_alive: boolean;
  last_process_alive_at: string | null;
  processes_exited_at: string | null;
  reaped: ReapedProcess[];
  quiet_window: Record<string, unknown> | null;
  callbacks: RecordedCallback[];
  events_received: number;
  events_ignored: number;
  created_at: string;
  updated_at: string;
}

export interface ResumeRecord {
  resume_id: string;
  at: string;
  prompt_sha256: string;
  /** The tool rules the resumed session was started with. */
  allowed_tools: string[];
}

export interface ReapedProcess {
  pid: number;
  outcome: string;
  at: string;
  command: string;
}

export interface RecordedCallback {
  event_type: CallbackEventType;
  idempotency_key: string;
  enqueued_at: string;
}

/** A callback a transition asks the gate to send, with the time that goes into its idempotency key. */
export interface CallbackIntent {
  event_type: CallbackEventType;
  observed_at: string;
  reason: string;
  quiet_window: QuietWindowMetrics | null;
  /** Readiness callbacks carry the evidence files found in the project. */
  with_evidence: boolean;
}

/** The cause a finishing callback carries: the run's, with the processes the gate reaped for it. */
export function causeOf(run: GateRun): RunCause | null {
  const reaped = run.reaped.length > 0 ? { reaped: reapedCause(run.reaped) } : {};
  if (run.cause) return { ...run.cause, ...reaped };
  return run.reaped.length > 0 ? { kind: 'reaped', ...reaped } : null;
}

export interface Transition {
  run: GateRun;
  callback: CallbackIntent | null;
}

/** What a dispatch request fixes about a run before its script starts. */
export type GateRunRequest = Pick<
  GateRun,
  | 'run_id'
  | 'project_id'
  | 'project_name'
  | 'project_dir'
  | 'prompt_file'
  | 'workload_class'
  | 'machine_target'
  | 'mode'
  | 'model'
  | 'reasoning_effort'
  | 'sandbox'
  | 'token_budget'
  | 'request_hash'
  | 'event_token_sha256'
  | 'vram_baseline_mib'
  | 'cgroup'
  | 'gpu_indices'
  | 'cpus'
  | 'cpus_unpinned_reason'
>;

/** What the dispatch script reported once it started the agent. */
export interface DispatchOutcome {
  script_output: Record<string, unknown>;
  duration_ms: number;
  root_pid: number | null;
  process_group_id: number | null;
  tmux_session: string | null;
}

/** A record for a run whose dispatch script is about to run. */
export function startingRun(request: GateRunRequest, now: string): GateRun {
  const { vram_baseline_mib, ...identity } = request;
  return {
    ...freshSession(),
    ...identity,
    dispatch_status: 'starting',
    dispatched_at: now,
    dispatch_duration_ms: null,
    script_output: {},
    root_pid: null,
    root_start_ticks: null,
    process_group_id: null,
    tmux_session: null,
    vram_baseline_mib,
    known_pids: [],
    alive_pids: [],
    root_alive: false,
    processes_alive: false,
    last_process_alive_at: null,
    processes_exited_at: null,
    last_progress_at: now,
    cause: null,
    reaped: [],
    quiet_window: null,
    callbacks: [],
    events_received: 0,
    events_ignored: 0,
    created_at: now,
    updated_at: now,
  };
}

/**
 * Takes `rootPid` as the run's root process. `rootStat` is that process as read now (null when it is already gone):
 * its start time tells the root apart from a later process that reuses the pid.
 */
export function adoptRoot(run: GateRun, rootPid: number, rootStat: TrackedPid | null): GateRun {
  if (!rootStat) return { ...run, root_pid: rootPid };
  return {
    ...run,
    root_pid: rootPid,
    root_start_ticks: rootStat.startTicks,
    known_pids: [...run.known_pids, { pid: rootStat.pid, startTicks: rootStat.startTicks }],
  };
}

/** The dispatch script is running as `script` (pid and start time): the processes it starts are the gate's own. */
export function recordDispatchScript(run: GateRun, script: TrackedPid | null): GateRun {
  return { ...run, dispatch_script: script };
}

/** The script started the agent: from now on the gate watches the run's processes. */
export function markDispatched(run: GateRun, outcome: DispatchOutcome, rootStat: TrackedPid | null): GateRun {
  const started: GateRun = {
    ...run,
    dispatch_status: 'started',
    dispatch_duration_ms: outcome.duration_ms,
    script_output: outcome.script_output,
    // A root the agent named while the script ran (and the gate checked) stays unless the script names its own.
    root_pid: outcome.root_pid ?? run.root_pid,
    process_group_id: outcome.process_group_id,
    tmux_session: outcome.tmux_session,
  };
  return outcome.root_pid === null ? started : adoptRoot(started, outcome.root_pid, rootStat);
}

/** A record still `starting` after a restart: whether the agent started is unknown, so the run is never retried. */
export function markDispatchInterrupted(run: GateRun): GateRun {
  return {
    ...run,
    dispatch_status: 'interrupted',
    gate_state: 'error',
    gate_reason: 'the gate stopped while the dispatch script ran; the agent may or may not have started',
  };
}

/** Cancelled by the control plane: a settled state, so the gate sends nothing more for this run. */
export function markCancelled(run: GateRun): GateRun {
  return { ...run, gate_state: 'cancelled', gate_reason: 'cancelled by the control plane' };
}

/** The processes a cancel stopped: none of the run's processes is counted alive any more. */
export function recordCancelStops(run: GateRun, stopped: readonly { pid: number; outcome: string }[], at: string): GateRun {
  return {
    ...run,
    reaped: [...run.reaped, ...stopped.map(({ pid, outcome }) => ({ pid, outcome, at, command: 'cancelled run' }))],
    alive_pids: [],
    processes_alive: false,
  };
}

export function recordReaped(run: GateRun, reaped: readonly ReapedProcess[]): GateRun {
  return { ...run, reaped: [...run.reaped, ...reaped] };
}

export function recordCallback(run: GateRun, callback: RecordedCallback): GateRun {
  return { ...run, callbacks: [...run.callbacks, callback] };
}

/** A lifecycle event as the gate received it, with the tmux session the agent runtime reported. */
export interface RunEventInput extends LifecycleInput {
  tmux_session?: string | undefined;
  token_usage?: TokenUsage | undefined;
  /** With session-end, from the gate's runner: how the tool ended. */
  cause?: RunCause | undefined;
}

/** The cause an end event tells: the runner's own, else what its exit status and a budget stop say. */
function causeOfEnd(input: RunEventInput): RunCause | null {
  if (input.event !== 'session-end') return null;
  if (input.cause) return input.cause;
  if (input.token_budget_exceeded) return { kind: 'token_budget' };
  return input.exit_code === undefined ? null : exitStatusCause(input.exit_code);
}

/**
 * Applies a lifecycle event to the run: its session changes as `applyLifecycleEvent` says, the event is counted, and
 * the tmux session the agent reports fills in what the dispatch script did not. A process group is never taken from
 * an agent: every process of a group named by it would be signalled on cancel. A new session forgets the callbacks of
 * the previous one.
 */
export function applyRunEvent(run: GateRun, input: RunEventInput): { run: GateRun; outcome: LifecycleOutcome } {
  const outcome = applyLifecycleEvent(run, input);
  const next: GateRun = {
    ...run,
    ...outcome.session,
    events_received: run.events_received + 1,
    events_ignored: run.events_ignored + (outcome.ignored_reason ? 1 : 0),
    callbacks: outcome.session_reset ? [] : run.callbacks,
    tmux_session: run.tmux_session ?? input.tmux_session ?? null,
    token_usage: input.token_usage ? withEarlierSessions(run, input.token_usage) : (run.token_usage ?? null),
    last_progress_at: input.received_at,
    cause: outcome.ignored_reason ? (run.cause ?? null) : (causeOfEnd(input) ?? run.cause ?? null),
  };
  return { run: next, outcome };
}

/** The runner saw the agent's tool move (a model answer, a tool event, a usage change): the stall clock starts over. */
export function recordProgress(run: GateRun, at: string, tokenUsage: TokenUsage | undefined): GateRun {
  return { ...run, last_progress_at: at, token_usage: tokenUsage ? withEarlierSessions(run, tokenUsage) : (run.token_usage ?? null) };
}

/** The run's whole spend: a session's usage, as its tool reports it, after what the run's earlier sessions spent. */
function withEarlierSessions(run: GateRun, session: TokenUsage): TokenUsage {
  const before = run.tokens_before_session;
  if (!before) return session;
  return {
    input_tokens: before.input_tokens + session.input_tokens,
    output_tokens: before.output_tokens + session.output_tokens,
    total_tokens: before.total_tokens + session.total_tokens,
  };
}

/**
 * The run's session starts again with an answer, or after a usage limit (docs/worker-gate.md#resuming-a-run): the
 * question or the limit is cleared, the gate watches for the new session's events and processes as after a dispatch,
 * and what the run spent so far stays counted.
 * The run keeps its slot, cgroup, GPUs and CPUs; `eventTokenSha256` is the new session's own event token.
 */
export function resumedRun(run: GateRun, resume: ResumeRecord, eventTokenSha256: string, runAllowedTools: string[]): GateRun {
  return {
    ...run,
    gate_state: 'running',
    gate_reason: `resumed (${resume.resume_id}); waiting for the agent to report`,
    question: null,
    question_detail: null,
    usage_limit: null,
    last_event: null,
    idle_seen_at: null,
    ended: false,
    dispatch_status: 'starting',
    event_token_sha256: eventTokenSha256,
    root_pid: null,
    root_start_ticks: null,
    process_group_id: null,
    dispatch_script: null,
    alive_pids: [],
    root_alive: false,
    processes_exited_at: null,
    quiet_window: null,
    cause: null,
    last_progress_at: resume.at,
    tokens_before_session: run.token_usage ?? null,
    allowed_tools: runAllowedTools,
    resumes: [...(run.resumes ?? []), resume],
    updated_at: resume.at,
  };
}
