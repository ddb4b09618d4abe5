import { totalmem } from 'node:os';
import type { WorkloadClass } from '../contract/workload.ts';
import type { RunLimits } from './run-cgroup.ts';

export interface RunLimitFields {
  run_memory_max_mib?: number | null | undefined;
  run_pids_max?: number | null | undefined;
  run_cpu_max_cores?: number | null | undefined;
}

export interface RunLimitConfig {
  run_memory_max_mib: number | null;
  run_pids_max: number | null;
  run_cpu_max_cores: number | null;
  workload_profiles: Partial<Record<WorkloadClass, RunLimitFields>>;
}

/** A run's default memory cap: most of the machine, so one run cannot push the gate and the system into the OOM killer. */
export const DEFAULT_MEMORY_SHARE = 0.75;

/**
 * The limits of a run of the workload class: the class's profile override, else the global field. Memory null means
 * the default share of this machine's memory; pids and CPU null mean unlimited.
 */
export function runLimitsFor(config: RunLimitConfig, workloadClass: WorkloadClass, machineMemoryBytes = totalmem()): RunLimits {
  const profile = config.workload_profiles[workloadClass] ?? {};
  const pick = <K extends keyof RunLimitFields>(field: K): number | null => {
    const value = profile[field];
    return value === undefined ? config[field] : value;
  };
  const memoryMib = pick('run_memory_max_mib');
  return {
    memoryBytes: memoryMib === null ? Math.floor(machineMemoryBytes * DEFAULT_MEMORY_SHARE) : memoryMib * 1024 * 1024,
    pidsMax: pick('run_pids_max'),
    cpuCores: pick('run_cpu_max_cores'),
  };
}
