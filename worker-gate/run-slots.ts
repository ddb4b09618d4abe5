import type { DispatchRequest } from './contract/gate-endpoints.ts';
import { placeRun, slotHoldersOf, type OfferedGpus, type SlotHolder } from './domain/run-placement.ts';
import type { WorkerGateConfig } from './gate-config.ts';
import type { CpuPinning } from './run-cgroups/index.ts';
import type { RunRecords } from './run-records.ts';
import type { GpuInventory } from './telemetry/sampler.ts';

/** Where a run was placed: what it holds, and why its cpu_count was not applied where it was not. */
export interface Placed {
  holder: SlotHolder;
  cpusUnpinnedReason: string | null;
}

export interface RunSlotsOptions {
  config: Pick<WorkerGateConfig, 'run_slots' | 'run_gpus'>;
  runs: RunRecords;
  /** Whether, and to which CPUs, the gate's run cgroups can be pinned now. */
  cpuPinning: () => CpuPinning;
  /** The machine's GPUs, which run_gpus 'all' offers. */
  gpuInventory: () => Promise<GpuInventory>;
}

/**
 * The gate's slots, GPUs and CPUs and who holds them (docs/worker-gate.md#slots-and-gpus): every unsettled run, and
 * the runs being placed now, whose records are not written yet. Placing a run reserves what it gets at once, so two
 * dispatches at the same moment never get the same slot, GPU or CPU.
 */
export class RunSlots {
  private readonly reservations = new Map<string, SlotHolder>();

  private readonly options: RunSlotsOptions;

  constructor(options: RunSlotsOptions) {
    this.options = options;
  }

  /** The runs holding a slot, oldest first, then those being placed. */
  holders(): SlotHolder[] {
    const recorded = slotHoldersOf(this.options.runs.all());
    const known = new Set(recorded.map((holder) => holder.run_id));
    return [...recorded, ...[...this.reservations.values()].filter((reservation) => !known.has(reservation.run_id))];
  }

  /** The GPUs the request may name (asked of nvidia-smi only when it names some): to be had before `reserve`. */
  async offeredGpusFor(request: Pick<DispatchRequest, 'gpu_indices'>): Promise<OfferedGpus | null> {
    if ((request.gpu_indices ?? []).length === 0) return null;
    const listed = (indices: readonly number[]) => (indices.length > 0 ? indices.join(', ') : 'none');
    const { run_gpus: runGpus } = this.options.config;
    if (runGpus !== 'all') return { indices: runGpus, source: `run_gpus lists ${listed(runGpus)}` };
    const inventory = await this.options.gpuInventory();
    if (inventory.kind === 'none') return { indices: [], source: `run_gpus is 'all', and ${inventory.reason}` };
    const indices = inventory.gpus.map((gpu) => gpu.index);
    return { indices, source: `nvidia-smi reports GPUs ${listed(indices)}` };
  }

  /**
   * Places the run and reserves what it gets until `release`, or says why it cannot go on this gate now. CPUs are
   * pinned only where the gate's cgroups have a cpuset; elsewhere the run goes unpinned and says why.
   */
  reserve(request: Pick<DispatchRequest, 'run_id' | 'gpu_indices' | 'cpu_count'>, offered: OfferedGpus | null): { ok: true; placed: Placed } | { ok: false; reason: string } {
    const pinning = request.cpu_count === undefined ? null : this.options.cpuPinning();
    const placement = placeRun({
      request,
      slots: this.options.config.run_slots,
      holders: this.holders(),
      offeredGpus: () => offered ?? { indices: [], source: 'no GPU was asked for' },
      pinnableCpus: pinning?.available ? pinning.cpus : null,
    });
    if (!placement.ok) return placement;
    const holder = { run_id: request.run_id, gpu_indices: request.gpu_indices ? [...request.gpu_indices] : null, cpus: placement.cpus };
    this.reservations.set(request.run_id, holder);
    return {
      ok: true,
      placed: { holder, cpusUnpinnedReason: pinning && !pinning.available ? `cpu_count ${request.cpu_count} not applied: ${pinning.reason}` : null },
    };
  }

  /** The run's record holds what it got from now on (or it was not started). */
  release(runId: string): void {
    this.reservations.delete(runId);
  }
}

/** What the agent's environment says of its GPUs: only its own are visible to CUDA and to the NVIDIA container runtime. */
export function gpuEnvironment(gpuIndices: readonly number[] | null): Record<string, string> {
  if (gpuIndices === null) return {};
  const visible = gpuIndices.join(',');
  return { CUDA_VISIBLE_DEVICES: visible, NVIDIA_VISIBLE_DEVICES: visible === '' ? 'void' : visible };
}
