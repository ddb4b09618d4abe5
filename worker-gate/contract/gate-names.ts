/** Names shared by the worker gate, its callbacks and the control plane that receives them (docs/runs.md#runs, docs/worker-gate.md#worker-gate). */

/** Lifecycle events the agent runtime posts to the gate (docs/worker-gate.md#worker-gate). */
export const LIFECYCLE_EVENTS = [
  'session-start',
  'session-idle',
  'ask-user-question',
  'session-stop',
  'session-end',
] as const;
export type LifecycleEvent = (typeof LIFECYCLE_EVENTS)[number];

/** What an agent's side may post to the gate: the lifecycle events, and `progress`, which only says the agent moves. */
export const AGENT_EVENTS = [...LIFECYCLE_EVENTS, 'progress'] as const;
export type AgentEvent = (typeof AGENT_EVENTS)[number];

/** start < idle < ask < stop = end: a lower-ranked event never undoes a higher one within a session. */
export const LIFECYCLE_EVENT_RANK: Readonly<Record<LifecycleEvent, number>> = {
  'session-start': 0,
  'session-idle': 1,
  'ask-user-question': 2,
  'session-stop': 3,
  'session-end': 3,
};

export const GATE_STATES = [
  'running',
  'pending_idle_gate',
  'waiting_for_process_exit',
  'waiting_for_quiet_window',
  'question_pending',
  /** The model refused for a usage limit: the run waits for its reset, then its session resumes. */
  'usage_limited',
  'wake_ready',
  'finished_pending_gate',
  'finished_ready',
  'cancelled',
  'error',
] as const;
export type GateState = (typeof GATE_STATES)[number];

/** States after which the gate sends nothing more for the current session. */
export const SETTLED_GATE_STATES: ReadonlySet<GateState> = new Set([
  'question_pending',
  'usage_limited',
  'wake_ready',
  'finished_ready',
  'cancelled',
  'error',
]);

/** Settled states the run does not leave for the control plane: only a pending question or a usage limit waits for more. */
export const RUN_OVER_GATE_STATES: ReadonlySet<GateState> = new Set(['wake_ready', 'finished_ready', 'cancelled', 'error']);

export const CALLBACK_EVENT_TYPES = [
  'session_started',
  /** The session ended without its evidence, and the gate resumed it (docs/worker-gate.md#continuing-a-premature-stop). */
  'session_continued',
  'question_pending',
  /** The model refused for a usage limit; the callback says when the session resumes (docs/worker-gate.md#waiting-out-a-usage-limit). */
  'usage_limited',
  'wake_ready',
  'session_finished_ready',
  'gate_timeout',
  'gate_error',
] as const;
export type CallbackEventType = (typeof CALLBACK_EVENT_TYPES)[number];

export const DISPATCH_MODES = ['exec', 'resume'] as const;
export type DispatchMode = (typeof DISPATCH_MODES)[number];

export const REASONING_EFFORTS = ['low', 'medium', 'high', 'xhigh'] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

/** A model or sandbox name: it reaches the agent's environment, so one short word ('' leaves the agent's default). */
export const AGENT_NAME_PATTERN = /^[A-Za-z0-9._:/@+-]{0,200}$/;
export const AGENT_NAME_RULE = 'must be at most 200 letters, digits, ".", "_", ":", "/", "@", "+" or "-"';

/** One telemetry reading of the worker machine. GPU figures are null on a machine without nvidia-smi. */
export interface TelemetrySample {
  /** Epoch milliseconds. */
  at_ms: number;
  /** Whole-machine CPU use since the previous sample; null for the very first reading. */
  cpu_pct: number | null;
  /** Highest utilisation over the GPUs. */
  gpu_pct: number | null;
  /** VRAM used, summed over the GPUs. */
  vram_used_mib: number | null;
  gpu_compute_pids: number[];
  gpu_count: number;
  /** 'nvidia-smi', or 'none' when no GPU tool is present (GPU figures then count as idle). */
  gpu_source: 'nvidia-smi' | 'none';
  /** MemAvailable + SwapFree. */
  memory_available_mib: number | null;
  memory_source: string;
  /** Why a figure is missing, e.g. "nvidia-smi not found: GPU figures are null and treated as idle". */
  notes: string[];
}

/**
 * Idempotency key of a gate callback (docs/worker-gate.md#worker-gate, callbacks): `<run_id>:<event_type>:<idle_seen_at or event time>`.
 * The same observation always yields the same key, across gate restarts.
 */
export function callbackIdempotencyKey(runId: string, eventType: CallbackEventType, observedAt: string): string {
  return `${runId}:${eventType}:${observedAt}`;
}
