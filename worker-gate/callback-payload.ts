import type { GateCallbackPayload, RunEvidence } from './contract/callback-body.ts';
import { callbackIdempotencyKey, type TelemetrySample } from './contract/gate-names.ts';
import { causeOf, type CallbackIntent, type GateRun } from './domain/gate-run.ts';
import type { CallbackEventType } from './contract/gate-names.ts';

/** The callbacks that say how a run ended (or paused, ready for its next turn, or for a usage limit): they carry its cause when known. */
const FINISHING: ReadonlySet<CallbackEventType> = new Set(['wake_ready', 'session_finished_ready', 'gate_timeout', 'gate_error', 'usage_limited']);

export interface CallbackPayloadInput {
  run: GateRun;
  callback: CallbackIntent;
  /** The latest telemetry reading; undefined before the first sample. */
  sample: TelemetrySample | undefined;
  /** Present on readiness callbacks: the evidence files found in the project. */
  evidence: RunEvidence | null;
  /** When the gate builds the callback. */
  seenAt: string;
}

/**
 * The body the gate posts to the control plane for one callback of a run (docs/worker-gate.md#worker-gate): the
 * run's state after the transition that asked for it, the machine's latest telemetry and the run's processes. Pure.
 */
export function buildCallbackPayload({ run, callback, sample, evidence, seenAt }: CallbackPayloadInput): GateCallbackPayload {
  const quietWindow = callback.quiet_window;
  const cause = FINISHING.has(callback.event_type) ? causeOf(run) : null;
  return {
    event_type: callback.event_type,
    run_id: run.run_id,
    session_id: run.session_id,
    project_id: run.project_id,
    gate_state: run.gate_state,
    reason: callback.reason,
    idle_seen_at: run.idle_seen_at,
    seen_at: seenAt,
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
    ...(run.question_detail ? { question_detail: run.question_detail } : {}),
    evidence,
    ...(run.token_usage ? { token_usage: run.token_usage } : {}),
    ...(cause ? { cause } : {}),
    ...(callback.event_type === 'usage_limited' && run.usage_limit ? { resumes_at: run.usage_limit.resumes_at, holds_slot: run.usage_limit.holds_slot ?? true } : {}),
    idempotency_key: callbackIdempotencyKey(run.run_id, callback.event_type, callback.observed_at),
  };
}
