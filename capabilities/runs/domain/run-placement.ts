import type { ClassRunNeeds, WorkerLane } from './worker-lanes.ts';
import type { WorkloadClass } from '../../../worker-gate/contract/workload.ts';

/**
 * Where on its worker a run goes (docs/runs.md#slots-and-gpus): which GPUs it is placed on and how many CPUs its gate
 * pins it to, from what it needs, the GPUs its target offers, those other runs hold and the memory its gate measured
 * free on each. Pure.
 */

export interface RunNeeds {
  gpu_count: number;
  /** Free on each of its GPUs. */
  gpu_memory_mib: number;
  /** null: not pinned to CPUs. */
  cpu_count: number | null;
}

/** What an item states, each field null when it leaves it to its workload class. */
export interface StatedNeeds {
  workload_class: WorkloadClass;
  gpu_count: number | null;
  gpu_memory_mib: number | null;
  cpu_count: number | null;
}

/** An item's needs: what it states, else its workload class's default (config workload_run_needs), else none. */
export function runNeedsOf(item: StatedNeeds, classNeeds: Readonly<Partial<Record<WorkloadClass, ClassRunNeeds>>>): RunNeeds {
  const byClass = classNeeds[item.workload_class] ?? {};
  return {
    gpu_count: item.gpu_count ?? byClass.gpu_count ?? 0,
    gpu_memory_mib: item.gpu_memory_mib ?? byClass.gpu_memory_mib ?? 0,
    cpu_count: item.cpu_count ?? byClass.cpu_count ?? null,
  };
}

/** One GPU as its gate reported it. */
export interface GateGpu {
  index: number;
  memory_total_mib: number | null;
  memory_free_mib: number | null;
  /** The run the gate itself has on it, if any. */
  run_id: string | null;
}

/** What the target's gate said of its GPUs: a reading, or why there is none. */
export type GateGpuReading = { ok: true; gpus: readonly GateGpu[] } | { ok: false; reason: string };

export type Placement =
  | {
      ok: true;
      /** null: the run is not pinned to GPUs (a one-slot target and a run that needs none: it has the machine). */
      gpu_indices: number[] | null;
      cpu_count: number | null;
      reason: string;
    }
  | { ok: false; reason: string };

export interface PlacementInput {
  lane: WorkerLane;
  needs: RunNeeds;
  /** GPUs of the target other runs hold in the ledger, with the run holding each. */
  held: ReadonlyMap<number, string>;
  /** Only asked for when the run needs a GPU. */
  gpus: GateGpuReading | null;
}

const mib = (value: number) => `${value} MiB`;

/** Whether a run needing `needs` is placed on `lane` now, on which GPUs, and why (or why not). */
export function planPlacement({ lane, needs, held, gpus }: PlacementInput): Placement {
  const where = `${lane.name} (slot ${lane.slot} of ${lane.slots})`;
  if (needs.gpu_count === 0) {
    // On a shared machine a run that needs no GPU sees none; alone on its target it has the machine, as before slots.
    const gpuIndices = lane.slots > 1 && lane.role === 'gpu_worker' ? [] : null;
    return { ok: true, gpu_indices: gpuIndices, cpu_count: needs.cpu_count, reason: `on ${where}, without a GPU` };
  }
  const wants = `needs ${needs.gpu_count} GPU${needs.gpu_count === 1 ? '' : 's'}${needs.gpu_memory_mib > 0 ? ` with ${mib(needs.gpu_memory_mib)} free on each` : ''}`;
  if (lane.role === 'cpu_worker') return { ok: false, reason: `${wants}, but ${lane.name} is a cpu_worker` };
  if (!gpus || !gpus.ok) return { ok: false, reason: `${wants}, but ${lane.name}'s GPUs could not be read: ${gpus?.reason ?? 'not asked'}` };

  const reported = new Map(gpus.gpus.map((gpu) => [gpu.index, gpu]));
  const offered = lane.gpus === 'all' ? [...reported.keys()].sort((a, b) => a - b) : lane.gpus.filter((index) => reported.has(index));
  if (offered.length < needs.gpu_count) {
    return { ok: false, reason: `${wants}, but ${lane.name} offers ${offered.length} GPU${offered.length === 1 ? '' : 's'}${lane.gpus === 'all' ? '' : ` of its configured ${lane.gpus.join(', ')} that its gate reports`}` };
  }
  const largest = Math.max(...offered.map((index) => reported.get(index)!.memory_total_mib ?? 0));
  if (needs.gpu_memory_mib > 0 && largest < needs.gpu_memory_mib) {
    return { ok: false, reason: `${wants}, but the largest GPU of ${lane.name} has ${mib(largest)}` };
  }

  const free: number[] = [];
  const busy: string[] = [];
  for (const index of offered) {
    const gpu = reported.get(index)!;
    const holder = held.get(index) ?? gpu.run_id;
    if (holder) busy.push(`GPU ${index} held by ${holder}`);
    else if (needs.gpu_memory_mib > 0 && (gpu.memory_free_mib ?? 0) < needs.gpu_memory_mib) busy.push(`GPU ${index} has ${mib(gpu.memory_free_mib ?? 0)} free`);
    else free.push(index);
  }
  if (free.length < needs.gpu_count) {
    return { ok: false, reason: `${wants} on ${lane.name}, ${free.length === 0 ? 'none is' : `only ${free.length} ${free.length === 1 ? 'is' : 'are'}`} free (${busy.join('; ')})` };
  }
  const gpuIndices = free.slice(0, needs.gpu_count);
  return { ok: true, gpu_indices: gpuIndices, cpu_count: needs.cpu_count, reason: `on ${where}, GPU${gpuIndices.length === 1 ? '' : 's'} ${gpuIndices.join(', ')}` };
}
