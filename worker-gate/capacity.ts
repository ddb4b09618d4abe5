import { freeCpus, gpuHolders, type SlotHolder } from './domain/run-placement.ts';
import type { CpuPinning } from './run-cgroups/index.ts';
import type { GpuInventory } from './telemetry/sampler.ts';

export interface CapacityInput {
  /** run_slots. */
  slots: number;
  /** run_gpus. */
  runGpus: 'all' | readonly number[];
  /** The runs holding a slot, oldest first. */
  holders: readonly SlotHolder[];
  /** The machine's GPUs as nvidia-smi last listed them; null while no query has answered. */
  inventory: GpuInventory | null;
  cpuPinning: CpuPinning;
}

/**
 * What the gate holds and has free for runs (`capacity` in /dashboard/api, docs/worker-gate.md#slots-and-gpus): its
 * slots and who holds them, each GPU with its use and the run pinned to it, the CPUs runs may be pinned to.
 */
export function capacityReport(input: CapacityInput) {
  const gpuHeld = gpuHolders(input.holders);
  const inventory = input.inventory?.kind === 'read' ? input.inventory : null;
  const pinnable = input.cpuPinning.available ? input.cpuPinning.cpus : [];
  return {
    slots: input.slots,
    slots_held: input.holders.length,
    gpus: (inventory?.gpus ?? []).map((gpu) => ({
      index: gpu.index,
      uuid: gpu.uuid,
      utilization_pct: gpu.utilization_pct,
      memory_used_mib: gpu.memory_used_mib,
      memory_total_mib: gpu.memory_total_mib,
      memory_free_mib: gpu.memory_used_mib === null || gpu.memory_total_mib === null ? null : Math.max(0, gpu.memory_total_mib - gpu.memory_used_mib),
      offered: input.runGpus === 'all' || input.runGpus.includes(gpu.index),
      run_id: gpuHeld.get(gpu.index) ?? null,
    })),
    gpus_read_at: inventory ? new Date(inventory.at_ms).toISOString() : null,
    runs: input.holders.map((holder) => ({
      run_id: holder.run_id,
      gpu_indices: holder.gpu_indices ? [...holder.gpu_indices] : null,
      cpus: holder.cpus ? [...holder.cpus] : null,
    })),
    cpu_pinning: {
      available: input.cpuPinning.available,
      cpus: pinnable,
      free: freeCpus(pinnable, input.holders),
      reason: input.cpuPinning.available ? null : input.cpuPinning.reason,
    },
  };
}
