/**
 * Worker preflight (interface.md "Queue operations" rule 2, decisions §4): checks that a worker gate is reachable,
 * accepts our token, can call us back, and has GPU and memory headroom, without committing a dispatch. Pure.
 */

export const PREFLIGHT_CHECK_NAMES = [
  'control_queue_paused',
  'control_maintenance_mode',
  'wake_gate_healthz',
  'wake_gate_dashboard_api',
  'worker_gpu_idle',
  'worker_memory_available',
  'worker_no_live_runs',
  'worker_callback_token_compatible',
] as const;
export type PreflightCheckName = (typeof PREFLIGHT_CHECK_NAMES)[number];

export interface PreflightCheck {
  name: PreflightCheckName;
  ok: boolean;
  /** One readable sentence. */
  detail: string;
  data: Record<string, unknown>;
}

/** WorkerPreflightResponse. */
export interface PreflightResult {
  ok: boolean;
  /** The worker target name, or the URL when the request named no configured target. */
  target: string;
  summary: string;
  checks: PreflightCheck[];
}

export const PREFLIGHT_DEFAULTS = {
  require_paused: true,
  strict: false,
  max_gpu_pct: 5,
  min_memory_available_mib: 16384,
} as const;
