import { tmpdir } from 'node:os';
import { LAUNCHED_RUNTIMES, type LaunchedRuntime } from '../contract/agent-runtimes.ts';
import { isInsideOrSame } from '../../platform/files/pinned-dir.ts';
import { realOrResolved } from '../agent-sandbox/sandbox-paths.ts';
import type { WorkerGateConfig } from '../gate-config.ts';

/**
 * Whether the gate's own records can be where an agent writes (docs/security.md#security-model). The gate refuses to start
 * when they can:
 * - state_dir inside project_root: every agent has its project there, read-write, sandboxed or not;
 * - an agent_writable_paths entry holding state_dir or project_root, or lying inside either: the sandbox binds it
 *   read-write over the masks that hide them;
 * - a real tool (Codex, Claude Code) not isolated in a mount namespace of its own (no bwrap): the tools' own sandboxes
 *   let the agent write the temporary directory (Codex's workspace-write: /tmp and $TMPDIR), so a state_dir there
 *   hands the agent the tool's home, its hooks and the gate's records, and a project_root there every other project.
 *   Under bwrap the agent has a private /tmp and sees neither.
 */

type PlacementConfig = Pick<WorkerGateConfig, 'state_dir' | 'project_root' | 'agent_runtime' | 'agent_runtime_by_workload_class' | 'agent_writable_paths'>;


/** The real tools some workload class of this gate runs. */
export function realToolsOf(config: PlacementConfig): LaunchedRuntime[] {
  const runtimes = new Set([config.agent_runtime, ...Object.values(config.agent_runtime_by_workload_class)]);
  return LAUNCHED_RUNTIMES.filter((runtime) => runtimes.has(runtime));
}

/** The temporary directories a tool's own sandbox lets its agent write. */
export function temporaryRoots(env: NodeJS.ProcessEnv = process.env): string[] {
  return [...new Set(['/tmp', '/var/tmp', tmpdir(), ...(env.TMPDIR ? [env.TMPDIR] : [])].map(realOrResolved))];
}

/** What places the gate's records within an agent's reach; empty when nothing does. */
export function agentReachProblems(config: PlacementConfig, options: { isolated: boolean; env?: NodeJS.ProcessEnv }): string[] {
  const stateDir = realOrResolved(config.state_dir);
  const projectRoot = realOrResolved(config.project_root);
  const problems: string[] = [];
  if (isInsideOrSame(projectRoot, stateDir)) {
    problems.push(`state_dir (${stateDir}) lies inside project_root (${projectRoot}), where agents write their projects: move it out`);
  }
  for (const writable of config.agent_writable_paths.map(realOrResolved)) {
    for (const [field, path] of [['state_dir', stateDir], ['project_root', projectRoot]] as const) {
      if (!isInsideOrSame(writable, path) && !isInsideOrSame(path, writable)) continue;
      problems.push(`agent_writable_paths entry ${writable} overlaps ${field} (${path}): every agent would see it read-write; name a directory apart from both`);
    }
  }
  const tools = realToolsOf(config);
  if (tools.length > 0 && !options.isolated) {
    for (const root of temporaryRoots(options.env)) {
      for (const [field, path] of [['state_dir', stateDir], ['project_root', projectRoot]] as const) {
        if (!isInsideOrSame(root, path)) continue;
        problems.push(
          `${field} (${path}) lies inside ${root}, which ${tools.join(' and ')} lets its agent write when the agent is not isolated by bwrap: ` +
            `move ${field} out of the temporary directory, or install bubblewrap so that the agent gets a private /tmp`,
        );
      }
    }
  }
  return problems;
}
