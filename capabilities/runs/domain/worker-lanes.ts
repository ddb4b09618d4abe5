import type { WorkloadClass } from '../../../worker-gate/contract/workload.ts';

/**
 * Worker targets and lanes (docs/runs.md#runs, docs/runs.md#slots-and-gpus). A worker target holds `slots` runs at
 * once, each slot a lane of its own: the first lane is named as the target, the others `<target>/<n>`. An item's
 * target is its own machine_target, else the target mapped to its workload class, else the default worker
 * (worker_wake_gate_url); it runs on any idle lane of that target. At most one item runs per lane at a time; different
 * lanes run in parallel. Pure: built from config values, no I/O.
 */

export type WorkerRole = 'gpu_worker' | 'cpu_worker';

export interface WorkerTarget {
  /** The target's name: the worker_targets key, or DEFAULT_TARGET_NAME for worker_wake_gate_url. */
  name: string;
  wake_gate_url: string;
  bearer_token: string;
  role: WorkerRole;
  /** The target's memory floor for preflight; absent means the preflight default. */
  min_memory_available_mib?: number;
  /** How many runs it holds at once. */
  slots: number;
  /** The GPUs runs may be placed on: all its gate reports, or these indices. */
  gpus: 'all' | readonly number[];
}

/** One slot of a worker target: what a run is claimed on. */
export interface WorkerLane extends WorkerTarget {
  /** The lane's name, unique across targets. */
  lane: string;
  /** 1-based. */
  slot: number;
}

/** What a run of a workload class needs when its item states nothing (config workload_run_needs). */
export interface ClassRunNeeds {
  gpu_count?: number | undefined;
  gpu_memory_mib?: number | undefined;
  cpu_count?: number | undefined;
}

export interface WorkerRouting {
  targets: ReadonlyMap<string, WorkerTarget>;
  /** Every lane of every target, by lane name, in config order. */
  lanes: ReadonlyMap<string, WorkerLane>;
  workloadTargets: Readonly<Partial<Record<WorkloadClass, string>>>;
  /** The target items fall back to; null when worker_wake_gate_url is not configured. */
  defaultTarget: string | null;
  classNeeds: Readonly<Partial<Record<WorkloadClass, ClassRunNeeds>>>;
}

/** Name of the implicit target built from worker_wake_gate_url; a worker_targets entry of that name takes precedence. */
export const DEFAULT_TARGET_NAME = 'default';

type TargetConfig = Omit<WorkerTarget, 'name' | 'slots' | 'gpus'> & { slots?: number | undefined; gpus?: 'all' | readonly number[] | undefined };

export interface RoutingConfig {
  worker_wake_gate_url?: string | undefined;
  worker_wake_gate_bearer_token?: string | undefined;
  worker_targets: Readonly<Record<string, TargetConfig>>;
  workload_machine_targets: Readonly<Partial<Record<WorkloadClass, string>>>;
  workload_run_needs?: Readonly<Partial<Record<WorkloadClass, ClassRunNeeds>>> | undefined;
}

/** The lane name of a target's slot. */
export const laneNameOf = (target: string, slot: number): string => (slot === 1 ? target : `${target}/${slot}`);

export function workerRoutingFrom(config: RoutingConfig): WorkerRouting {
  const targets = new Map<string, WorkerTarget>();
  if (config.worker_wake_gate_url) {
    targets.set(DEFAULT_TARGET_NAME, {
      name: DEFAULT_TARGET_NAME,
      wake_gate_url: config.worker_wake_gate_url,
      bearer_token: config.worker_wake_gate_bearer_token ?? '',
      role: 'gpu_worker',
      slots: 1,
      gpus: 'all',
    });
  }
  for (const [name, target] of Object.entries(config.worker_targets)) targets.set(name, { ...target, name, slots: target.slots ?? 1, gpus: target.gpus ?? 'all' });
  const lanes = new Map<string, WorkerLane>();
  for (const target of targets.values()) {
    for (let slot = 1; slot <= target.slots; slot += 1) lanes.set(laneNameOf(target.name, slot), { ...target, lane: laneNameOf(target.name, slot), slot });
  }
  return {
    targets,
    lanes,
    workloadTargets: config.workload_machine_targets,
    defaultTarget: targets.has(DEFAULT_TARGET_NAME) ? DEFAULT_TARGET_NAME : null,
    classNeeds: config.workload_run_needs ?? {},
  };
}

/** The lanes of one target, first slot first. */
export function lanesOf(routing: WorkerRouting, target: string): WorkerLane[] {
  return [...routing.lanes.values()].filter((lane) => lane.name === target);
}

export interface LaneInput {
  machine_target: string | null;
  workload_class: WorkloadClass;
}

export type LaneResolution = { ok: true; target: WorkerTarget } | { ok: false; reason: string };

/** The worker target an item dispatches to (any idle lane of it), or why it has none. */
export function resolveLane(item: LaneInput, routing: WorkerRouting): LaneResolution {
  const name = item.machine_target ?? routing.workloadTargets[item.workload_class] ?? routing.defaultTarget;
  if (name === null || name === undefined) {
    return { ok: false, reason: `no worker target for workload class ${item.workload_class} and no default worker (worker_wake_gate_url) configured` };
  }
  const target = routing.targets.get(name);
  if (!target) return { ok: false, reason: `machine_target "${name}" is not a configured worker target` };
  return { ok: true, target };
}

/** Which queue items a lane takes, by the routing rule of resolveLane, in a form a query can use. */
export interface LaneSelector {
  lane: string;
  /** Items whose own machine_target is this lane's target. */
  machineTarget: string;
  /** Items without a machine_target whose workload class maps to this lane's target. */
  workloadClasses: WorkloadClass[];
  /** Items without a machine_target whose class maps nowhere (true for the default target's lanes): these classes are excluded. */
  unmappedExcept: WorkloadClass[] | null;
}

export function laneSelector(lane: string, routing: WorkerRouting): LaneSelector {
  const target = routing.lanes.get(lane)?.name ?? lane;
  const mapped = Object.entries(routing.workloadTargets).filter((entry): entry is [WorkloadClass, string] => typeof entry[1] === 'string');
  return {
    lane,
    machineTarget: target,
    workloadClasses: mapped.filter(([, name]) => name === target).map(([workloadClass]) => workloadClass),
    unmappedExcept: target === routing.defaultTarget ? mapped.map(([workloadClass]) => workloadClass) : null,
  };
}

/** What dispatch-next shows about where an item would go (its dispatch_route); never the token itself. */
export function dispatchRouteOf(lane: WorkerLane) {
  return {
    machine_target: lane.name,
    lane: lane.lane,
    slot: lane.slot,
    wake_gate_url: lane.wake_gate_url,
    worker_role: lane.role,
    token_configured: lane.bearer_token.length > 0,
  };
}
