import type { WorkloadClass } from '../../../worker-gate/contract/workload.ts';

/**
 * Worker targets and lanes (docs/runs.md#runs). Each worker target is a lane; an item's lane is its own machine_target,
 * else the target mapped to its workload class, else the default worker (worker_wake_gate_url). At most one item runs
 * per lane at a time; different lanes run in parallel. Pure: built from config values, no I/O.
 */

export type WorkerRole = 'gpu_worker' | 'cpu_worker';

export interface WorkerTarget {
  /** The lane name: the worker_targets key, or DEFAULT_TARGET_NAME for worker_wake_gate_url. */
  name: string;
  wake_gate_url: string;
  bearer_token: string;
  role: WorkerRole;
  /** The target's memory floor for preflight; absent means the preflight default. */
  min_memory_available_mib?: number;
}

export interface WorkerRouting {
  targets: ReadonlyMap<string, WorkerTarget>;
  workloadTargets: Readonly<Partial<Record<WorkloadClass, string>>>;
  /** The target items fall back to; null when worker_wake_gate_url is not configured. */
  defaultTarget: string | null;
}

/** Name of the implicit target built from worker_wake_gate_url; a worker_targets entry of that name takes precedence. */
export const DEFAULT_TARGET_NAME = 'default';

export interface RoutingConfig {
  worker_wake_gate_url?: string | undefined;
  worker_wake_gate_bearer_token?: string | undefined;
  worker_targets: Readonly<Record<string, Omit<WorkerTarget, 'name'>>>;
  workload_machine_targets: Readonly<Partial<Record<WorkloadClass, string>>>;
}

export function workerRoutingFrom(config: RoutingConfig): WorkerRouting {
  const targets = new Map<string, WorkerTarget>();
  if (config.worker_wake_gate_url) {
    targets.set(DEFAULT_TARGET_NAME, {
      name: DEFAULT_TARGET_NAME,
      wake_gate_url: config.worker_wake_gate_url,
      bearer_token: config.worker_wake_gate_bearer_token ?? '',
      role: 'gpu_worker',
    });
  }
  for (const [name, target] of Object.entries(config.worker_targets)) targets.set(name, { ...target, name });
  return {
    targets,
    workloadTargets: config.workload_machine_targets,
    defaultTarget: targets.has(DEFAULT_TARGET_NAME) ? DEFAULT_TARGET_NAME : null,
  };
}

export interface LaneInput {
  machine_target: string | null;
  workload_class: WorkloadClass;
}

export type LaneResolution = { ok: true; target: WorkerTarget } | { ok: false; reason: string };

/** The lane (worker target) an item dispatches to, or why it has none. */
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
  /** Items whose own machine_target is this lane. */
  machineTarget: string;
  /** Items without a machine_target whose workload class maps to this lane. */
  workloadClasses: WorkloadClass[];
  /** Items without a machine_target whose class maps nowhere (true for the default lane): these classes are excluded. */
  unmappedExcept: WorkloadClass[] | null;
}

export function laneSelector(lane: string, routing: WorkerRouting): LaneSelector {
  const mapped = Object.entries(routing.workloadTargets).filter((entry): entry is [WorkloadClass, string] => typeof entry[1] === 'string');
  return {
    lane,
    machineTarget: lane,
    workloadClasses: mapped.filter(([, target]) => target === lane).map(([workloadClass]) => workloadClass),
    unmappedExcept: lane === routing.defaultTarget ? mapped.map(([workloadClass]) => workloadClass) : null,
  };
}

/** What dispatch-next shows about where an item would go (its dispatch_route); never the token itself. */
export function dispatchRouteOf(target: WorkerTarget) {
  return {
    machine_target: target.name,
    wake_gate_url: target.wake_gate_url,
    worker_role: target.role,
    token_configured: target.bearer_token.length > 0,
  };
}
