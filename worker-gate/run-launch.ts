import { relative } from 'node:path';
import type { AgentStart } from './agent-start.ts';
import { AGENT_SANDBOX_PLAN_ENV, sandboxArgvPrefix, scriptDirOf, type AgentSandbox, type AgentSandboxPlan } from './agent-sandbox/index.ts';
import { markDispatched, recordDispatchScript, type GateRun } from './domain/gate-run.ts';
import { runDispatchScript, type DispatchScriptOutput, type DispatchScriptResult } from './dispatch-script.ts';
import { readProcessStat } from './process-table.ts';
import type { RunRecords } from './run-records.ts';
import type { RunCgroup } from './run-cgroups/index.ts';
import { resolvedRoot } from './project-paths.ts';
import { gpuEnvironment } from './run-slots.ts';
import { PinnedDir, UnsafePathError } from '../platform/files/pinned-dir.ts';
import { HttpError } from '../platform/http/errors.ts';

/**
 * What a dispatch and a resume of a run share (docs/worker-gate.md#worker-gate): the project pinned, the user and
 * sandbox the run's first process starts in, and the dispatch contract's environment.
 */

/** The user and sandbox a run's first process starts in, and what its environment carries of them. */
export interface Confinement {
  plan: AgentSandboxPlan;
  argvPrefix: string[];
  env: Record<string, string>;
}

/** The project directory held open, its real path inside project_root (platform/files/pinned-dir.ts); 409 when it is not there. */
export function pinProject(projectRoot: string, projectDir: string): PinnedDir {
  const root = resolvedRoot(projectRoot);
  try {
    return PinnedDir.open(root, relative(root, projectDir), { selfBoundary: true });
  } catch (error) {
    if (error instanceof UnsafePathError) throw new HttpError(400, `project_dir ${projectDir} escapes project_root through a symbolic link`);
    throw new HttpError(409, `project_dir ${projectDir} does not exist; call /prepare-project first`);
  }
}

/**
 * How the run's first process starts: the operator's dispatch script (`scriptPath`) runs wholly as the agent user in
 * its sandbox; a launcher runs as the gate's user and gets the plan for the tool it starts (AGENT_SANDBOX_PLAN).
 */
export function confinementFor(sandbox: AgentSandbox, scriptPath: string | null, project: PinnedDir, projectDir: string, promptFile: string): Confinement {
  let plan: AgentSandboxPlan;
  try {
    // The sandbox shows the directory pinned here, by its real path: a link swapped in for project_dir since moves nothing.
    plan = sandbox.prepareRun(projectDir, project.path, promptFile, scriptPath === null ? null : scriptDirOf(scriptPath));
  } catch (error) {
    throw new HttpError(502, `the agent's sandbox could not be prepared: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (scriptPath !== null) return { plan, argvPrefix: sandboxArgvPrefix(plan), env: {} };
  return { plan, argvPrefix: [], env: { [AGENT_SANDBOX_PLAN_ENV]: JSON.stringify(plan) } };
}

/** The dispatch contract's environment of a run, with its agent's start and placement. */
export function runEnvironment(
  run: GateRun,
  launch: { eventUrl: string; eventToken: string; start: AgentStart; confinement: Confinement; tokenBudget: number | null },
): Record<string, string> {
  return {
    RUN_ID: run.run_id,
    PROJECT_ID: run.project_id,
    PROJECT_DIR: run.project_dir,
    PROMPT_FILE: run.prompt_file,
    DISPATCH_MODE: run.mode,
    MODEL: run.model,
    REASONING_EFFORT: run.reasoning_effort,
    SANDBOX: launch.start.sandbox,
    ...(launch.tokenBudget !== null ? { TOKEN_BUDGET: String(launch.tokenBudget) } : {}),
    GATE_EVENT_URL: launch.eventUrl,
    GATE_EVENT_TOKEN: launch.eventToken,
    ...launch.start.env,
    ...launch.confinement.env,
    ...gpuEnvironment(run.gpu_indices ?? null),
  };
}

/**
 * Runs the dispatch script of `run`, whose record is saved: in the pinned project itself (a link swapped in for the
 * project after the checks cannot move the agent out), inside the run's cgroup (its join comes first: the user
 * switch, the sandbox and the script all start in it), as the confinement says.
 */
export function runScriptOf(
  runs: RunRecords,
  run: GateRun,
  launch: { scriptPath: string; project: PinnedDir; timeoutMs: number; cgroup: RunCgroup | null; confinement: Confinement; env: NodeJS.ProcessEnv },
): Promise<DispatchScriptResult> {
  return runDispatchScript({
    scriptPath: launch.scriptPath,
    cwd: `/proc/self/fd/${launch.project.fd}`,
    timeoutMs: launch.timeoutMs,
    argvPrefix: [...(launch.cgroup?.joinArgv() ?? []), ...launch.confinement.argvPrefix],
    // Recorded before the agent can post an event naming its root: the pid it names must descend from this one.
    onSpawn: (pid) => {
      const stat = readProcessStat(pid);
      runs.save(recordDispatchScript(runs.get(run.run_id) ?? run, stat ? { pid, startTicks: stat.startTicks } : null));
    },
    env: launch.env,
  });
}

/** The script started the agent: applied to the run's latest record, since the agent may have posted events meanwhile. */
export function recordScriptStarted(runs: RunRecords, run: GateRun, result: { output: DispatchScriptOutput; duration_ms: number }): GateRun {
  const rootPid = result.output.root_pid ?? null;
  return runs.save(
    markDispatched(
      runs.get(run.run_id) ?? run,
      {
        script_output: result.output,
        duration_ms: result.duration_ms,
        root_pid: rootPid,
        process_group_id: result.output.process_group_id ?? null,
        tmux_session: result.output.tmux_session ?? null,
      },
      rootPid === null ? null : readProcessStat(rootPid),
    ),
  );
}
