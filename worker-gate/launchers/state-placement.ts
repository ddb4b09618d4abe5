import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { LAUNCHED_RUNTIMES, type LaunchedRuntime } from '../../domain/agent-runtimes.ts';
import { isInsideOrSame } from '../../files/pinned-dir.ts';
import type { WorkerGateConfig } from '../gate-config.ts';

/**
 * Whether the gate's own records can be where an agent writes (README "Security model"). The gate refuses to start
 * when they can:
 * - state_dir inside project_root: every agent has its project there, read-write, sandboxed or not;
 * - a real tool (Codex, Claude Code) not isolated in a mount namespace of its own (no bwrap): the tools' own sandboxes
 *   let the agent write the temporary directory (Codex's workspace-write: /tmp and $TMPDIR), so a state_dir there
 *   hands the agent the tool's home, its hooks and the gate's records, and a project_root there every other project.
 *   Under bwrap the agent has a private /tmp and sees neither.
 */

type PlacementConfig = Pick<WorkerGateConfig, 'state_dir' | 'project_root' | 'agent_runtime' | 'agent_runtime_by_workload_class'>;

const realOrResolved = (path: string) => {
  try {
    return realpathSync(resolve(path));
  } catch {
    return resolve(path);
  }
};

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
