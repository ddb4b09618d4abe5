import type { Config } from '../platform/config/schema.ts';
import type { AgentRuntime } from './contract/agent-runtimes.ts';
import { resolveWorkloadProfile, type GateThresholdProfile, type WorkloadClass } from './contract/workload.ts';

export type WorkerGateConfig = Pick<
  Config,
  | 'state_dir'
  | 'project_root'
  | 'dispatch_script_path'
  | 'agent_runtime'
  | 'agent_runtime_by_workload_class'
  | 'codex_path'
  | 'agent_tmux_enabled'
  | 'claude_code_path'
  | 'agent_credential_env'
  | 'agent_user'
  | 'agent_isolation'
  | 'agent_read_only_paths'
  | 'agent_writable_paths'
  | 'dispatch_timeout_sec'
  | 'sample_interval_sec'
  | 'quiet_window_scope'
  | 'idle_sustain_sec'
  | 'cpu_idle_threshold_pct'
  | 'gpu_idle_avg_threshold_pct'
  | 'gpu_idle_peak_threshold_pct'
  | 'vram_delta_threshold_mib'
  | 'max_wait_after_idle_sec'
  | 'stall_after_sec'
  | 'default_workload_class'
  | 'workload_profiles'
  | 'run_cgroup_mode'
  | 'run_cgroup_v2_root'
  | 'run_cgroup_parent'
  | 'run_memory_max_mib'
  | 'run_pids_max'
  | 'run_cpu_max_cores'
  | 'run_slots'
  | 'run_gpus'
  | 'agent_continue_limit'
  | 'usage_limit_backoff_sec'
  | 'usage_limit_hold_sec'
  | 'stale_project_process_reaper_enabled'
  | 'stale_project_process_grace_sec'
  | 'stale_project_process_term_grace_sec'
  | 'stale_project_process_command_markers'
  | 'completion_callback_url'
  | 'completion_callback_fallback_urls'
  | 'completion_callback_token'
  | 'worker_wake_gate_bearer_token'
  | 'completion_callback_timeout_sec'
  | 'log_events'
  | 'temporal_tls_client_key_path'
  | 'temporal_tls_client_cert_path'
>;

/** The quiet-window thresholds of a workload class, with this gate's overrides. */
export function profileFor(config: WorkerGateConfig, workloadClass: WorkloadClass): GateThresholdProfile {
  return resolveWorkloadProfile(workloadClass, config, config.workload_profiles);
}

/** How long a run of the workload class may show no progress before the gate stops it as stalled. */
export function stallAfterSecFor(config: WorkerGateConfig, workloadClass: WorkloadClass): number {
  return config.workload_profiles[workloadClass]?.stall_after_sec ?? config.stall_after_sec;
}

/** The agent this gate starts for a run of the workload class (docs/worker-gate.md#running-real-agents). */
export function runtimeFor(config: WorkerGateConfig, workloadClass: WorkloadClass): AgentRuntime {
  return config.agent_runtime_by_workload_class[workloadClass] ?? config.agent_runtime;
}
