import { readFileSync, realpathSync } from 'node:fs';
import { dirname, sep } from 'node:path';
import { agentOwnedDir, sandboxArgvPrefix, type AgentSandboxPlan } from '../agent-sandbox/index.ts';
import { PinnedDir } from '../../platform/files/pinned-dir.ts';
import { makePrivateDir } from './records.ts';

/**
 * A real tool in the agent's sandbox (docs/security.md#security-model): the runner stays outside, as the gate's user, and
 * starts the tool as the agent user inside bwrap (worker-gate/agent-sandbox), with the tool's own home bound in.
 *
 * Inside the sandbox the tool sees its home at TOOL_HOME_IN_SANDBOX, outside the temporary directory, whatever
 * state_dir is: the tools' own sandboxes let the agent write /tmp (Codex's workspace-write), so a home there would be
 * the agent's to rewrite (hooks, rollout); and Codex puts the helper names its sandbox execs (codex-linux-sandbox) on
 * PATH from `$CODEX_HOME/tmp/arg0`, which it refuses to make under the temporary directory, so with a system bwrap
 * every sandboxed command failed (`bwrap: execvp codex-linux-sandbox`).
 */
export const TOOL_HOME_IN_SANDBOX = '/run/rcp-agent/tool-home';

export interface ToolHome {
  /** Where the launcher reads and writes it. */
  onHost: string;
  /** Where the tool sees it. */
  seen: string;
  /** The home held open: the launcher writes the tool's config through it, never following a link the agent left. */
  dir: PinnedDir;
}

/** Makes the tool's home (the agent user's own, under state_dir, when the gate switches users) and holds it open. */
export function openToolHome(onHost: string, stateDir: string, plan: AgentSandboxPlan | null): ToolHome {
  if (plan) agentOwnedDir(onHost, stateDir, plan);
  else makePrivateDir(onHost);
  const dir = PinnedDir.open(onHost, '.', { allowBase: true, selfBoundary: true });
  return { onHost, seen: plan?.bwrap ? TOOL_HOME_IN_SANDBOX : onHost, dir };
}

/** The directory a tool is installed in (the folder holding its node_modules), shown to it read-only. */
export function installRootOf(binary: string): string {
  const real = realpathSync(binary);
  const at = real.indexOf(`${sep}node_modules${sep}`);
  return at > 0 ? real.slice(0, at) : dirname(real);
}

/**
 * The argv that starts the tool: `[setpriv …] [bwrap … --bind <home> <seen> --] binary …args`, or the tool alone
 * without a plan. A pid namespace of its own: whatever the agent leaves running ends with the tool.
 */
export function toolArgv(plan: AgentSandboxPlan | null, binary: string, args: readonly string[], home: ToolHome): string[] {
  if (!plan) return [binary, ...args];
  const prefix = sandboxArgvPrefix(plan, { readOnly: [installRootOf(binary), dirname(binary)], pidNamespace: true, dieWithParent: true });
  if (plan.bwrap) prefix.splice(prefix.lastIndexOf('--'), 0, '--bind', home.onHost, home.seen);
  return [...prefix, binary, ...args];
}

/** The pids whose parent is `pid`, oldest first. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * The tool's own pid, for the signals that let it end its session: under bwrap (with its pid namespace) the first child
 * of bwrap's init, itself the child of the bwrap the runner started; the started process itself without bwrap. Null
 * while that process tree is not (or no longer) there.
 */
export function sandboxedToolPid(startedPid: number, plan: AgentSandboxPlan | null): number | null {
  if (!plan?.bwrap) return startedPid;
  let pid = startedPid;
  for (let level = 0; level < 2; level += 1) {
    const first = childrenOf(pid)[0];
    if (first === undefined) return null;
    pid = first;
  }
  return pid;
}
