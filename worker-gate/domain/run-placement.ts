/**
 * Where a run goes on its gate (docs/worker-gate.md#slots-and-gpus): a slot of the gate's run_slots, the GPUs its
 * dispatch names (offered by run_gpus, held by no other run of the gate), and the CPUs its cpu_count asks for (the
 * lowest its gate has free). Pure: what the gate holds and offers comes in as input.
 */
import { RUN_OVER_GATE_STATES } from '../contract/gate-names.ts';
import type { GateRun } from './gate-run.ts';

/** A run holding one of the gate's slots, with the GPUs and CPUs it is pinned to (null: not pinned). */
export interface SlotHolder {
  run_id: string;
  gpu_indices: readonly number[] | null;
  cpus: readonly number[] | null;
}

/** The GPUs the gate offers to runs, and how it knows them, for the 409 that names a GPU it does not offer. */
export interface OfferedGpus {
  indices: readonly number[];
  /** e.g. "run_gpus lists 0, 1" or "nvidia-smi reports GPUs 0, 1, 2, 3". */
  source: string;
}

export interface PlacementRequest {
  run_id: string;
  /** Absent: the run is not pinned to GPUs (it sees every GPU and holds none). */
  gpu_indices?: readonly number[] | undefined;
  /** Absent: the run is not pinned to CPUs. */
  cpu_count?: number | undefined;
}

export interface PlacementInput {
  request: PlacementRequest;
  /** run_slots. */
  slots: number;
  /** Every run holding a slot now (the request's own run is left out wherever it appears). */
  holders: readonly SlotHolder[];
  /** Needed only when the request names GPUs. */
  offeredGpus: () => OfferedGpus;
  /** The CPUs runs may be pinned to; null where the gate cannot pin (the run then goes unpinned). */
  pinnableCpus: readonly number[] | null;
}

export type Placement = { ok: true; cpus: number[] | null } | { ok: false; reason: string };

const listed = (values: readonly (number | string)[]) => values.join(', ');

/**
 * Whether a run of the gate holds a slot: from its dispatch until it is over. A run whose agent waits on a person's
 * answer, or for the model's usage limit to reset, keeps its slot, GPUs and CPUs, so that its session resumes where it
 * was (docs/runs.md#answering-the-agent, docs/runs.md#waiting-out-a-usage-limit); one whose wait is longer than
 * usage_limit_hold_sec lets them go until it resumes.
 */
export const holdsSlot = (run: GateRun): boolean =>
  !RUN_OVER_GATE_STATES.has(run.gate_state) && !(run.gate_state === 'usage_limited' && run.usage_limit?.holds_slot === false);

/** The slot holders among the gate's run records, oldest dispatch first. */
export function slotHoldersOf(runs: readonly GateRun[]): SlotHolder[] {
  return runs
    .filter(holdsSlot)
    .sort((a, b) => a.dispatched_at.localeCompare(b.dispatched_at))
    .map((run) => ({ run_id: run.run_id, gpu_indices: run.gpu_indices ?? null, cpus: run.cpus ?? null }));
}

/** The run holding each GPU (by index). */
export function gpuHolders(holders: readonly SlotHolder[]): Map<number, string> {
  const held = new Map<number, string>();
  for (const holder of holders) for (const index of holder.gpu_indices ?? []) held.set(index, holder.run_id);
  return held;
}

/** The run holding each CPU. */
export function cpuHolders(holders: readonly SlotHolder[]): Map<number, string> {
  const held = new Map<number, string>();
  for (const holder of holders) for (const cpu of holder.cpus ?? []) held.set(cpu, holder.run_id);
  return held;
}

/** The CPUs of `pinnable` no holder is pinned to, lowest first. */
export function freeCpus(pinnable: readonly number[], holders: readonly SlotHolder[]): number[] {
  const held = cpuHolders(holders);
  return [...pinnable].filter((cpu) => !held.has(cpu)).sort((a, b) => a - b);
}

/**
 * Places the run, or says why it cannot go on this gate now (a 409): every slot held, a GPU not offered or held by
 * another run, too few free CPUs. CPUs are picked only where the gate can pin them.
 */
export function placeRun(input: PlacementInput): Placement {
  const { request } = input;
  const others = input.holders.filter((holder) => holder.run_id !== request.run_id);
  if (others.length >= input.slots) {
    return { ok: false, reason: `all ${input.slots} slots hold runs: ${listed(others.map((holder) => holder.run_id))}` };
  }
  const wanted = request.gpu_indices ?? [];
  if (wanted.length > 0) {
    const offered = input.offeredGpus();
    const notOffered = wanted.filter((index) => !offered.indices.includes(index));
    if (notOffered.length > 0) {
      return { ok: false, reason: `${notOffered.length === 1 ? 'GPU' : 'GPUs'} ${listed(notOffered)} ${notOffered.length === 1 ? 'is' : 'are'} not offered by this gate (${offered.source})` };
    }
    const held = gpuHolders(others);
    const taken = wanted.filter((index) => held.has(index));
    if (taken.length > 0) return { ok: false, reason: taken.map((index) => `GPU ${index} is held by run '${held.get(index)}'`).join('; ') };
  }
  if (request.cpu_count === undefined || input.pinnableCpus === null) return { ok: true, cpus: null };
  const free = freeCpus(input.pinnableCpus, others);
  if (free.length < request.cpu_count) {
    const holding = [...new Set(cpuHolders(others).values())];
    const by = holding.length > 0 ? `; pinned runs hold the others: ${listed(holding)}` : '';
    return { ok: false, reason: `cpu_count ${request.cpu_count}: only ${free.length} of this gate's ${input.pinnableCpus.length} CPUs are free (${free.length > 0 ? listed(free) : 'none'})${by}` };
  }
  return { ok: true, cpus: free.slice(0, request.cpu_count) };
}

/**
 * Why a run that let its slot go for a long usage-limit wait cannot take it back now (a 409), or null: every slot is
 * held by other runs, or another run took one of its GPUs or CPUs.
 */
export function retakeConflict(run: GateRun, holders: readonly SlotHolder[], slots: number): string | null {
  const others = holders.filter((holder) => holder.run_id !== run.run_id);
  if (others.length >= slots) return `all ${slots} slots hold runs: ${listed(others.map((holder) => holder.run_id))}`;
  const gpus = gpuHolders(others);
  const cpus = cpuHolders(others);
  const taken = [
    ...(run.gpu_indices ?? []).filter((index) => gpus.has(index)).map((index) => `GPU ${index} is held by run '${gpus.get(index)}'`),
    ...(run.cpus ?? []).filter((cpu) => cpus.has(cpu)).map((cpu) => `CPU ${cpu} is held by run '${cpus.get(cpu)}'`),
  ];
  return taken.length > 0 ? taken.join('; ') : null;
}
