/**
 * A run's own share of the machine, for a quiet window judged on the run (config `quiet_window_scope: 'run'`,
 * docs/worker-gate.md#worker-gate): its CPU as a percentage of one core and its GPU use from the compute processes that belong to it.
 * Pure: readings come in as input.
 */
import type { WindowSample } from './quiet-window.ts';
import type { GateThresholdProfile } from '../contract/workload.ts';

/** CPU time the run has used so far: its cgroup's counter, or the counters of its tracked processes. */
export type RunCpuUsage =
  | { kind: 'cgroup'; usec: number }
  /** utime + stime in clock ticks per live process, keyed by `pid:startTicks` so a reused pid is another process. */
  | { kind: 'processes'; ticks: ReadonlyMap<string, number>; ticksPerSec: number };

export interface RunCpuReading {
  at_ms: number;
  usage: RunCpuUsage;
}

/** One GPU row of nvidia-smi, as a run's share reads it. */
export interface GpuRow {
  index: number;
  utilization_pct: number | null;
  memory_used_mib: number | null;
  uuid: string | null;
}

/** What nvidia-smi said at the last sample: nothing to ask ('none'), a failed query ('failed'), or its rows. */
export type RunGpuReading =
  | { kind: 'none' }
  | { kind: 'failed' }
  | {
      kind: 'read';
      reading: {
        gpus: readonly GpuRow[];
        computeApps: readonly { pid: number; used_memory_mib: number | null; gpu_uuid: string | null }[];
      };
    };

/**
 * The GPUs a run was given (GateRun.gpu_indices): null when it was not pinned and may use any GPU; [] when it was
 * given none.
 */
export type RunGpuIndices = readonly number[] | null;

/** The rows of the GPUs the run may use: its own where it was given some, else every GPU. */
function gpusOf(rows: readonly GpuRow[], gpuIndices: RunGpuIndices): readonly GpuRow[] {
  return gpuIndices === null ? rows : rows.filter((row) => gpuIndices.includes(row.index));
}

const highest = (values: readonly (number | null)[]) => {
  const present = values.filter((value): value is number => value !== null);
  return present.length > 0 ? Math.max(...present) : null;
};

/**
 * The run's CPU between two readings, as a percentage of one core (two busy cores read 200). Null without a previous
 * reading, when the kind of counter changed, or when no time passed. A cgroup's counter covers every process the run
 * ever had; process counters cover the live ones only, so a process that exited between readings drops out and a
 * process first seen counts its whole CPU time (the cautious side).
 */
export function runCpuPercent(previous: RunCpuReading | null, current: RunCpuReading): number | null {
  if (!previous || previous.usage.kind !== current.usage.kind) return null;
  const elapsedMs = current.at_ms - previous.at_ms;
  if (elapsedMs <= 0) return null;
  if (current.usage.kind === 'cgroup' && previous.usage.kind === 'cgroup') {
    return (Math.max(0, current.usage.usec - previous.usage.usec) / (elapsedMs * 1000)) * 100;
  }
  if (current.usage.kind === 'processes' && previous.usage.kind === 'processes') {
    let ticks = 0;
    for (const [key, now] of current.usage.ticks) ticks += Math.max(0, now - (previous.usage.ticks.get(key) ?? 0));
    return (ticks / current.usage.ticksPerSec / (elapsedMs / 1000)) * 100;
  }
  return null;
}

/**
 * The run's GPU figures: the highest utilisation of the GPUs its compute processes run on and the GPU memory they
 * hold. A run without a compute process uses no GPU (0, 0). A process whose GPU is not named counts against every
 * GPU. A failed query leaves the GPU unknown, counted fully busy so the window never closes blind; no GPU tool at all
 * gives null figures (treated as idle, with the window's notice). A run given GPUs (`gpuIndices`) is judged on those
 * alone: its processes on another GPU count for nothing (its agent sees only its own), one whose GPU is not named
 * counts against its own GPUs; a run given none uses no GPU.
 */
export function runGpuUse(gpu: RunGpuReading, runPids: ReadonlySet<number>, gpuIndices: RunGpuIndices = null): Pick<WindowSample, 'gpu_pct' | 'vram_used_mib'> {
  if (gpuIndices !== null && gpuIndices.length === 0) return { gpu_pct: 0, vram_used_mib: 0 };
  if (gpu.kind === 'none') return { gpu_pct: null, vram_used_mib: null };
  if (gpu.kind === 'failed') return { gpu_pct: 100, vram_used_mib: null };
  const gpus = gpusOf(gpu.reading.gpus, gpuIndices);
  const ownUuids = new Set(gpus.map((g) => g.uuid).filter((uuid) => uuid !== null));
  const apps = gpu.reading.computeApps.filter(
    (app) => runPids.has(app.pid) && (gpuIndices === null || app.gpu_uuid === null || ownUuids.has(app.gpu_uuid)),
  );
  if (apps.length === 0) return { gpu_pct: 0, vram_used_mib: 0 };
  const uuids = new Set(apps.map((app) => app.gpu_uuid));
  const everyGpu = uuids.has(null) || !gpus.some((g) => g.uuid !== null && uuids.has(g.uuid));
  const used = gpus.filter((g) => everyGpu || (g.uuid !== null && uuids.has(g.uuid)));
  return {
    gpu_pct: highest(used.map((g) => g.utilization_pct)),
    vram_used_mib: apps.reduce((sum, app) => sum + (app.used_memory_mib ?? 0), 0),
  };
}

/** One quiet-window sample of the run's own use. Its VRAM is the run's own, so its baseline is 0. */
export function runWindowSample(at_ms: number, cpuPct: number | null, gpu: RunGpuReading, runPids: ReadonlySet<number>, gpuIndices: RunGpuIndices = null): WindowSample {
  return { at_ms, cpu_pct: cpuPct, ...runGpuUse(gpu, runPids, gpuIndices) };
}

/**
 * The GPU figures of a run given GPUs, judged on the machine (`quiet_window_scope: 'machine'`): the busiest of its own
 * GPUs and the memory used on them, whoever uses it; the machine's other GPUs are other runs'. A run given none uses
 * no GPU. A failed query, or a reading without a utilisation figure of its GPUs, leaves them unknown: fully busy.
 */
export function pinnedMachineGpuUse(gpu: RunGpuReading, gpuIndices: readonly number[]): Pick<WindowSample, 'gpu_pct' | 'vram_used_mib'> {
  if (gpuIndices.length === 0) return { gpu_pct: 0, vram_used_mib: 0 };
  if (gpu.kind === 'none') return { gpu_pct: null, vram_used_mib: null };
  if (gpu.kind === 'failed') return { gpu_pct: 100, vram_used_mib: null };
  const own = gpusOf(gpu.reading.gpus, gpuIndices);
  const memory = own.map((g) => g.memory_used_mib).filter((value): value is number => value !== null);
  return {
    gpu_pct: highest(own.map((g) => g.utilization_pct)) ?? 100,
    vram_used_mib: memory.length > 0 ? memory.reduce((sum, value) => sum + value, 0) : null,
  };
}

/**
 * The VRAM in use when a run is dispatched, its baseline in the machine's scope: on its own GPUs where it was given
 * some (0 for none), else on every GPU (`machineVramMib`, the sample's sum). Null while unknown.
 */
export function vramBaselineOf(gpu: RunGpuReading, gpuIndices: RunGpuIndices, machineVramMib: number | null): number | null {
  if (gpuIndices === null) return machineVramMib;
  return pinnedMachineGpuUse(gpu, gpuIndices).vram_used_mib;
}

/**
 * Whether the run's own use in one sample shows it working: CPU or GPU above the thresholds its quiet window calls
 * quiet. A silent script that computes (training, an evaluation) is progressing; a tool waiting on a model that never
 * answers uses next to nothing and is not.
 */
export function showsWork(sample: WindowSample, profile: Pick<GateThresholdProfile, 'cpu_idle_threshold_pct' | 'gpu_idle_avg_threshold_pct'>): boolean {
  return (sample.cpu_pct ?? 0) > profile.cpu_idle_threshold_pct || (sample.gpu_pct ?? 0) > profile.gpu_idle_avg_threshold_pct;
}
