import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, mkdirSync, readdirSync, rmdirSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RunCgroupRecord } from '../domain/gate-run.ts';
import { readCgroupFile, writeCgroupFile } from './cgroup-files.ts';
import { pinnableCpus, setUpV1Cpuset, type CpusetSupport } from './cpuset.ts';
import { cgroupMounts, directoryOf, ownCgroups, type CgroupMount } from './mounts.ts';
import type { RunCgroup, RunLimits } from './run-cgroup.ts';
import { V1_CONTROLLERS, V1RunCgroup, type V1Controller, type V1Paths } from './v1.ts';
import { V2RunCgroup } from './v2.ts';

export type RunCgroupMode = 'v2' | 'v1' | 'none';

/** Whether runs can be pinned to CPUs (their cgroup's cpuset), to which CPUs, or why not. */
export type CpuPinning = { available: true; cpus: number[] } | { available: false; reason: string };
export type RunCgroupSetting = 'auto' | RunCgroupMode;

/** How this gate contains its runs, as its start log line, /dashboard/api and the dashboard say. */
export interface RunCgroupsStatus {
  mode: RunCgroupMode;
  reason: string;
  /** The directories holding this gate's run cgroups (one per hierarchy); empty without cgroups. */
  parents: string[];
  /** The limits this mode cannot apply (a v2 controller not delegated); empty when all hold. */
  limits_unavailable: string[];
}

export interface RunCgroupHostConfig {
  state_dir: string;
  run_cgroup_mode: RunCgroupSetting;
  run_cgroup_v2_root: string;
  run_cgroup_parent: string;
}

/** The v2 controllers whose limits a run gets; memory and pids are the ones that keep a run from taking the machine. */
const V2_LIMIT_CONTROLLERS = ['memory', 'pids', 'cpu'] as const;
const V2_ESSENTIAL = ['memory', 'pids'];
/** Without freezer a v1 cgroup cannot be stopped without a fork race; without pids and memory nothing is limited. */
const V1_REQUIRED: readonly V1Controller[] = ['freezer', 'pids', 'memory'];
const RUN_PREFIX = 'run-';
/** The leaf a gate with a delegated v2 cgroup of its own lives in, beside its runs' parent. */
const GATE_LEAF = 'gate';

/** The directory name of this gate's run cgroups: configured, or one of its own derived from its state_dir. */
export function parentNameFor(config: Pick<RunCgroupHostConfig, 'state_dir' | 'run_cgroup_parent'>): string {
  if (config.run_cgroup_parent !== '') return config.run_cgroup_parent;
  return `rcp-gate-${createHash('sha256').update(resolve(config.state_dir)).digest('hex').slice(0, 12)}`;
}

/** Reopens the cgroup a run's record names (after a gate restart too). */
export function reopenRunCgroup(record: RunCgroupRecord): RunCgroup {
  return record.kind === 'v2' ? new V2RunCgroup(record.paths[0]!) : new V1RunCgroup(record.paths);
}

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

type Layout =
  | { mode: 'v2'; parent: string; limitsUnavailable: string[]; reason: string; cpuset: CpusetSupport }
  | { mode: 'v1'; parents: V1Paths; reason: string; cpuset: CpusetSupport };

/** The v2 cgroup the gate may create runs under: the configured one, or its own when delegated to it; else why not. */
function v2Root(config: RunCgroupHostConfig, mounts: CgroupMount[]): { root: string; own: boolean } | { why: string } {
  const unified = mounts.find((mount) => mount.version === 2);
  if (config.run_cgroup_v2_root !== '') {
    if (!writable(join(config.run_cgroup_v2_root, 'cgroup.procs'))) return { why: `run_cgroup_v2_root ${config.run_cgroup_v2_root} is no cgroup v2 directory this gate may write` };
    return { root: config.run_cgroup_v2_root, own: false };
  }
  if (!unified) return { why: 'no cgroup v2 hierarchy is mounted' };
  const ownPath = ownCgroups().get('');
  if (ownPath === undefined) return { why: 'this process is in no cgroup v2 hierarchy' };
  const own = directoryOf(unified, ownPath);
  if (own === null) return { why: `the gate's cgroup ${ownPath} is not visible under ${unified.mountPoint}` };
  // The hierarchy's root is shared by everything on the machine; only a subtree handed to the gate is its own.
  if (own === unified.mountPoint) return { why: `the gate runs in the root of the v2 hierarchy (${own}), not in a delegated subtree (systemd Delegate=yes or run_cgroup_v2_root)` };
  // In a leaf named `gate` (where an earlier start moved it, or systemd's DelegateSubgroup=gate starts it) the delegated
  // subtree is the leaf's parent.
  const root = basename(own) === GATE_LEAF && dirname(own) !== unified.mountPoint ? dirname(own) : own;
  if (!writable(root) || !writable(join(root, 'cgroup.subtree_control'))) return { why: `the gate's own v2 cgroup ${root} is not delegated to it (not writable)` };
  // A cgroup shared with other processes (a login session's scope, a shell that started the gate) is not the gate's to
  // rearrange, even where it may write it: only one that holds the gate alone, as systemd's Delegate=yes gives it.
  const others = (readCgroupFile(own, 'cgroup.procs') ?? '').split('\n').filter((pid) => pid !== '' && Number(pid) !== process.pid);
  if (others.length > 0) return { why: `the gate's own v2 cgroup ${own} also holds other processes (${others.slice(0, 5).join(', ')}), so it is not a subtree delegated to the gate alone` };
  return { root, own: true };
}

function controllersOf(dir: string, file: 'cgroup.controllers' | 'cgroup.subtree_control'): string[] {
  return (readCgroupFile(dir, file) ?? '').trim().split(/\s+/).filter((name) => name !== '');
}

/**
 * Makes `<root>/<parent>` with the limit controllers enabled for its children. A delegated cgroup of the gate's own
 * first gets the gate moved into `<root>/gate`: v2 lets a cgroup hand controllers to its children only while it
 * holds no process itself.
 */
function setUpV2(root: string, own: boolean, parentName: string): Layout {
  if (own) {
    const leaf = join(root, GATE_LEAF);
    if (!existsSync(leaf)) mkdirSync(leaf);
    writeCgroupFile(leaf, 'cgroup.procs', String(process.pid));
  }
  const offered = controllersOf(root, 'cgroup.controllers');
  const wanted = V2_LIMIT_CONTROLLERS.filter((name) => offered.includes(name));
  const enable = (dir: string) => {
    if (wanted.length > 0) writeCgroupFile(dir, 'cgroup.subtree_control', wanted.map((name) => `+${name}`).join(' '));
  };
  let note = '';
  try {
    enable(root);
  } catch (error) {
    note = `; enabling ${wanted.join(', ')} in ${root} failed: ${errorText(error)}`;
  }
  const parent = join(root, parentName);
  if (!existsSync(parent)) mkdirSync(parent);
  try {
    enable(parent);
  } catch (error) {
    note += `; enabling ${wanted.join(', ')} in ${parent} failed: ${errorText(error)}`;
  }
  const enabled = controllersOf(parent, 'cgroup.subtree_control');
  const missing = V2_LIMIT_CONTROLLERS.filter((name) => !enabled.includes(name));
  const limitsUnavailable = missing.map((name) => `${name} (the v2 controller is not available in ${root})`);
  const cpuset = setUpV2Cpuset(root, parent, offered);
  return { mode: 'v2', parent, limitsUnavailable, cpuset, reason: `cgroup v2 under ${own ? "the gate's delegated cgroup" : 'run_cgroup_v2_root'} ${root}${note}` };
}

/**
 * Enables the cpuset controller for the runs' parent, where `root` offers it; pinning a run to CPUs needs it, nothing
 * else does, so a refusal only leaves runs unpinned.
 */
function setUpV2Cpuset(root: string, parent: string, offered: readonly string[]): CpusetSupport {
  if (!offered.includes('cpuset')) return { available: false, reason: `the cpuset controller is not available in the v2 cgroup ${root}` };
  try {
    for (const dir of [root, parent]) if (!controllersOf(dir, 'cgroup.subtree_control').includes('cpuset')) writeCgroupFile(dir, 'cgroup.subtree_control', '+cpuset');
  } catch (error) {
    return { available: false, reason: `enabling the cpuset controller under ${root} failed: ${errorText(error)}` };
  }
  return { available: true, kind: 'v2', parent };
}

/** The run-cgroup parent in each writable v1 hierarchy, inside the gate's own cgroup there (so limits above it still hold). */
function setUpV1(parentName: string, mounts: CgroupMount[]): Layout | { why: string } {
  const own = ownCgroups();
  const parents: V1Paths = {};
  for (const controller of V1_CONTROLLERS) {
    const mount = mounts.find((candidate) => candidate.version === 1 && candidate.controllers.includes(controller));
    if (!mount) continue;
    const base = directoryOf(mount, own.get(controller) ?? '/');
    if (base !== null && writable(base)) parents[controller] = join(base, parentName);
  }
  const missing = V1_REQUIRED.filter((controller) => parents[controller] === undefined);
  if (missing.length > 0) return { why: `the v1 hierarchies ${missing.join(', ')} are not mounted or not writable` };
  try {
    for (const dir of new Set(Object.values(parents))) if (!existsSync(dir)) mkdirSync(dir);
  } catch (error) {
    return { why: `the v1 hierarchies refused a cgroup: ${errorText(error)}` };
  }
  // Only pinned runs join the cpuset hierarchy: the others keep every CPU their gate has.
  const cpusetMount = mounts.find((candidate) => candidate.version === 1 && candidate.controllers.includes('cpuset'));
  const cpusetBase = cpusetMount ? directoryOf(cpusetMount, own.get('cpuset') ?? '/') : null;
  const cpuset = setUpV1Cpuset(cpusetBase !== null && writable(cpusetBase) ? cpusetBase : null, parentName);
  return { mode: 'v1', parents, cpuset, reason: `cgroup v1 hierarchies ${Object.keys(parents).join(', ')}` };
}

function essentialsOffered(root: string): boolean {
  const offered = controllersOf(root, 'cgroup.controllers');
  return V2_ESSENTIAL.every((name) => offered.includes(name));
}

/**
 * Picks how runs are contained (docs/worker-gate.md#worker-gate). `auto`: v2 where the gate has a delegated subtree that offers
 * the memory and pids controllers; else the v1 hierarchies where they are writable; else v2 for membership alone (no
 * limits); else no cgroups, tracking the process tree. An explicit mode that cannot be had stops the gate.
 */
function chooseLayout(config: RunCgroupHostConfig): Layout | { mode: 'none'; reason: string } {
  const setting = config.run_cgroup_mode;
  if (setting === 'none') return { mode: 'none', reason: 'run_cgroup_mode is none: runs are tracked by their process tree' };
  const mounts = cgroupMounts();
  const parentName = parentNameFor(config);
  const v2 = v2Root(config, mounts);
  if (setting === 'v2') {
    if ('why' in v2) throw new Error(`run_cgroup_mode v2: ${v2.why}`);
    return setUpV2(v2.root, v2.own, parentName);
  }
  if (setting === 'v1') {
    const v1 = setUpV1(parentName, mounts);
    if ('why' in v1) throw new Error(`run_cgroup_mode v1: ${v1.why}`);
    return v1;
  }
  if (!('why' in v2) && essentialsOffered(v2.root)) return setUpV2(v2.root, v2.own, parentName);
  const v1 = setUpV1(parentName, mounts);
  if (!('why' in v1)) return { ...v1, reason: `${v1.reason}${'why' in v2 ? ` (no v2: ${v2.why})` : ' (the v2 subtree offers no memory and pids controllers)'}` };
  if (!('why' in v2)) return setUpV2(v2.root, v2.own, parentName);
  return { mode: 'none', reason: `no cgroup this gate may use (${v2.why}; ${v1.why}): runs are tracked by their process tree, which a process leaving the project in a session of its own escapes, and no run has limits` };
}

/** Creates, reopens and sweeps this gate's run cgroups in the hierarchy it chose at start. */
export class RunCgroupHost {
  private readonly layout: Layout | { mode: 'none'; reason: string };

  private constructor(layout: Layout | { mode: 'none'; reason: string }) {
    this.layout = layout;
  }

  static detect(config: RunCgroupHostConfig): RunCgroupHost {
    return new RunCgroupHost(chooseLayout(config));
  }

  status(): RunCgroupsStatus {
    const layout = this.layout;
    const v1Parents = layout.mode === 'v1' ? [...Object.values(layout.parents), ...(layout.cpuset.available ? [layout.cpuset.parent] : [])] : [];
    return {
      mode: layout.mode,
      reason: layout.reason,
      parents: layout.mode === 'v2' ? [layout.parent] : [...new Set(v1Parents)],
      limits_unavailable: layout.mode === 'v2' ? layout.limitsUnavailable : [],
    };
  }

  /** Whether a run's cgroup can be pinned to CPUs here, and to which (the runs' parent's cpuset as it is now); else why not. */
  cpuPinning(): CpuPinning {
    const layout = this.layout;
    if (layout.mode === 'none') return { available: false, reason: `runs get no cgroup here (${layout.reason})` };
    if (!layout.cpuset.available) return { available: false, reason: layout.cpuset.reason };
    const cpus = pinnableCpus(layout.cpuset);
    return cpus.length > 0 ? { available: true, cpus } : { available: false, reason: `the cpuset of ${layout.cpuset.parent} lists no CPU` };
  }

  /**
   * A new, empty cgroup for the run with its limits, pinned to `cpus` when given (which cpuPinning must allow); null
   * without cgroups. One left by an earlier attempt is replaced.
   */
  async create(runId: string, limits: RunLimits, cpus: readonly number[] | null = null): Promise<RunCgroup | null> {
    const layout = this.layout;
    if (layout.mode === 'none') return null;
    const name = `${RUN_PREFIX}${runId}`;
    const stale = this.pathsFor(name);
    if (stale.some((path) => existsSync(path))) await stopAndRemove(this.openByName(name));
    if (cpus !== null && !layout.cpuset.available) throw new Error(`a run cannot be pinned to CPUs here: ${layout.cpuset.reason}`);
    if (layout.mode === 'v2') return V2RunCgroup.create(join(layout.parent, name), limits, cpus).cgroup;
    const byController: V1Paths = {};
    for (const [controller, parent] of Object.entries(layout.parents)) byController[controller as V1Controller] = join(parent, name);
    const pinned = cpus !== null && layout.cpuset.available ? { path: join(layout.cpuset.parent, name), cpus } : null;
    return V1RunCgroup.create(byController, limits, pinned);
  }

  /** Stops and removes this gate's run cgroups that no run it tracks holds (a restart's leftovers); returns their names. */
  async sweep(kept: ReadonlySet<string>): Promise<string[]> {
    const names = new Set<string>();
    for (const parent of this.status().parents) {
      try {
        for (const entry of readdirSync(parent, { withFileTypes: true })) if (entry.isDirectory() && entry.name.startsWith(RUN_PREFIX)) names.add(entry.name);
      } catch {
        // the parent went away: nothing to sweep there
      }
    }
    const swept: string[] = [];
    for (const name of names) {
      const cgroup = this.openByName(name);
      if (cgroup.record().paths.some((path) => kept.has(path))) continue;
      await stopAndRemove(cgroup);
      swept.push(name);
    }
    return swept;
  }

  /**
   * A gate that stops leaves no litter: the run cgroups with no process left, then its parent directories where they
   * are empty. A run still going keeps its cgroup (the kernel refuses to remove a populated one) and the parent above it.
   */
  releaseParents(): void {
    const ignore = (remove: () => void) => {
      try {
        remove();
      } catch {
        // still populated, or gone already
      }
    };
    for (const parent of this.status().parents) {
      for (const entry of safeEntries(parent)) if (entry.startsWith(RUN_PREFIX)) ignore(() => rmdirSync(join(parent, entry)));
      ignore(() => rmdirSync(parent));
    }
  }

  private pathsFor(name: string): string[] {
    return this.status().parents.map((parent) => join(parent, name));
  }

  private openByName(name: string): RunCgroup {
    return this.layout.mode === 'v2' ? new V2RunCgroup(this.pathsFor(name)[0]!) : new V1RunCgroup(this.pathsFor(name));
  }
}

function safeEntries(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Every end of a run: its processes stopped, then its cgroup removed. */
export async function stopAndRemove(cgroup: RunCgroup): Promise<{ killed: number }> {
  try {
    const result = await cgroup.kill();
    await removeOnceReleased(cgroup);
    return result;
  } catch (error) {
    // Two ends of one run may meet (a cancel and the monitor's tick): the cgroup the other removed is stopped already,
    // as it is removed only once empty.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { killed: 0 };
    throw error;
  }
}

const RELEASE_WAIT_MS = 5_000;

/**
 * Removes the cgroup once the kernel lets go of it: a member killed a moment ago may still count (a zombie its parent
 * outside the cgroup has not reaped yet), and rmdir answers EBUSY until it does.
 */
async function removeOnceReleased(cgroup: RunCgroup): Promise<void> {
  const deadline = Date.now() + RELEASE_WAIT_MS;
  for (;;) {
    try {
      cgroup.remove();
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EBUSY' || Date.now() >= deadline) throw error;
      await sleep(20);
    }
  }
}
