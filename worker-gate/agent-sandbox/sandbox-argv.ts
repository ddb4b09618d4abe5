import { existsSync, statSync } from 'node:fs';
import type { AgentSandboxPlan } from './plan.ts';
import { isWithin, OPTIONAL_SYSTEM_PATHS, realOrResolved, systemEntries } from './sandbox-paths.ts';
import { capabilityDropArgv, userSwitchArgv } from './user-switch.ts';

export interface SandboxExtras {
  /** Also shown read-only (a tool's binary directory, its runtime). */
  readOnly?: readonly string[];
  /** Also shown read-write, after the gate's paths are masked (a tool's own home under state_dir). */
  readWrite?: readonly string[];
  /**
   * A pid namespace of the sandbox's own, with its /proc. Only where the process that starts the sandbox waits for it
   * (a launcher and its tool): the namespace, and every process in it, ends when its first process exits. Without it
   * the sandbox has no /proc at all, so nothing in it sees the gate's or other runs' processes.
   */
  pidNamespace?: boolean;
  /** The sandbox's processes get SIGKILL when the process that started it dies. */
  dieWithParent?: boolean;
  /** A new terminal session, so the agent cannot push input into a terminal it shares (TIOCSTI). */
  newSession?: boolean;
}

function unique(paths: readonly string[]): string[] {
  return [...new Set(paths.map(realOrResolved))];
}

/**
 * Masks each of the gate's paths that a bound directory would show: a directory by an empty tmpfs, a file by
 * /dev/null. A tool kept inside a masked directory (a dispatch script under state_dir) is bound again on top.
 */
function maskArgs(hidden: readonly string[], bound: readonly string[]): string[] {
  const shown = unique(hidden).filter((path) => existsSync(path) && bound.some((source) => isWithin(path, source)));
  const dirs = shown.filter((path) => statSync(path).isDirectory());
  const files = shown.filter((path) => !dirs.includes(path));
  const rebound = bound.filter((source) => dirs.some((dir) => source !== dir && isWithin(source, dir)));
  return [
    ...dirs.flatMap((dir) => ['--tmpfs', dir]),
    ...rebound.flatMap((source) => ['--ro-bind', source, source]),
    // Last, so that a tool bound again cannot show a config file kept beside it.
    ...files
      .filter((file) => !dirs.some((dir) => isWithin(file, dir)) || rebound.some((source) => isWithin(file, source)))
      .flatMap((file) => ['--ro-bind', '/dev/null', file]),
  ];
}

/** The bwrap options of a plan, up to the command (docs/security.md#security-model: what the agent sees). */
export function bwrapArgs(plan: AgentSandboxPlan, extras: SandboxExtras = {}): string[] {
  const args: string[] = [];
  const bound: string[] = [];
  for (const entry of systemEntries()) {
    if (entry.kind === 'link') args.push('--symlink', entry.target, entry.path);
    else {
      args.push('--ro-bind', entry.path, entry.path);
      bound.push(entry.path);
    }
  }
  for (const path of OPTIONAL_SYSTEM_PATHS) args.push('--ro-bind-try', path, path);
  args.push('--dev', '/dev');
  if (extras.pidNamespace) args.push('--unshare-pid', '--proc', '/proc');
  // After /tmp's tmpfs, so that tools kept under the temporary directory still show.
  args.push('--tmpfs', '/tmp', '--unshare-ipc');
  for (const path of unique([...plan.read_only, ...(extras.readOnly ?? [])])) {
    if (!existsSync(path)) continue;
    args.push('--ro-bind', path, path);
    bound.push(path);
  }
  args.push(...maskArgs(plan.hidden, bound));
  // After the masks: the agent's own project and home lie inside the gate's project_root and state_dir.
  args.push('--bind', plan.project_source, plan.project_dir);
  for (const path of unique([plan.home_dir, ...plan.writable, ...(extras.readWrite ?? [])])) args.push('--bind', path, path);
  for (const path of unique(plan.shown_files)) if (existsSync(path)) args.push('--ro-bind', path, path);
  args.push('--chdir', plan.project_dir);
  if (plan.drop_capabilities) args.push('--cap-drop', 'ALL');
  if (extras.dieWithParent) args.push('--die-with-parent');
  if (extras.newSession) args.push('--new-session');
  return args;
}

/**
 * The argv that starts the rest of an argv as the plan's agent: `[setpriv --reuid U --regid G --clear-groups --inh-caps=-all --ambient-caps=-all --]`
 * `[bwrap … --]`; [] when the gate can neither switch users nor sandbox. The caller appends the command (and puts
 * the run's cgroup join before it).
 */
export function sandboxArgvPrefix(plan: AgentSandboxPlan, extras: SandboxExtras = {}): string[] {
  const prefix: string[] = [];
  if (plan.user && plan.setpriv) prefix.push(...userSwitchArgv(plan.setpriv, plan.user.uid, plan.user.gid));
  else if (plan.setpriv) prefix.push(...capabilityDropArgv(plan.setpriv));
  if (plan.bwrap) prefix.push(plan.bwrap, ...bwrapArgs(plan, extras), '--');
  return prefix;
}
