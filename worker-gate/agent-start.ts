import { existsSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { DispatchRequest } from './contract/gate-endpoints.ts';
import { DEFAULT_AGENT_SANDBOX, dispatchOptionProblems, type AgentRuntime } from './contract/agent-runtimes.ts';
import { HttpError } from '../platform/http/errors.ts';
import type { WorkerGateConfig } from './gate-config.ts';
import { pinnedAgentBinary } from './launchers/installed-agents.ts';
import { agentHomePath, agentRecordsPath, lastRecordedSession, makePrivateDir } from './launchers/records.ts';

const LAUNCHER_SCRIPT = fileURLToPath(new URL('./launchers/launcher.sh', import.meta.url));

/** How the gate starts a run's agent: the script it runs, the sandbox it hands over, and what the script needs besides the contract. */
export interface AgentStart {
  scriptPath: string;
  sandbox: string;
  env: Record<string, string>;
}

/** Refuses (422) dispatch options the runtime's tool does not take; before anything is written. */
export function checkDispatchOptions(runtime: AgentRuntime, request: DispatchRequest): void {
  const problems = dispatchOptionProblems(runtime, { sandbox: request.sandbox });
  if (problems.length > 0) throw new HttpError(422, problems.join('; '));
}

/**
 * The start of a run's agent under `runtime` (docs/worker-gate.md#running-real-agents): `script` runs dispatch_script_path as it
 * is; a real tool runs the gate's launcher, with the tool's executable, the tool's own home for this project, the
 * directory of the gate's records of it (both under state_dir, never in the project) and, for a resume, the project's
 * last recorded session.
 */
export function agentStartFor(config: WorkerGateConfig, runtime: AgentRuntime, projectDir: string, request: Pick<DispatchRequest, 'mode' | 'sandbox'>): AgentStart {
  if (runtime === 'script') {
    if (!config.dispatch_script_path) throw new HttpError(502, "dispatch_script_path is not set, and this run's agent_runtime is 'script'");
    return { scriptPath: config.dispatch_script_path, sandbox: request.sandbox, env: {} };
  }
  const pathField = runtime === 'codex' ? 'codex_path' : 'claude_code_path';
  const binary = config[pathField] || pinnedAgentBinary(runtime);
  if (!existsSync(binary)) throw new HttpError(502, `${runtime} is not installed at ${binary}: run scripts/ensure-agents.sh, or set ${pathField}`);
  const stateDir = realpathSync(config.state_dir);
  const records = agentRecordsPath(stateDir, projectDir);
  makePrivateDir(records);
  const env: Record<string, string> = {
    AGENT_RUNTIME: runtime,
    AGENT_BINARY: binary,
    AGENT_HOME: agentHomePath(stateDir, projectDir, runtime),
    AGENT_RECORDS: records,
    AGENT_STATE_DIR: stateDir,
    AGENT_TMUX: config.agent_tmux_enabled ? '1' : '0',
  };
  if (request.mode === 'resume') {
    const session = lastRecordedSession(records, runtime);
    if (!session) throw new HttpError(409, `mode resume: the project has no recorded ${runtime} session to continue (dispatch it with mode exec first)`);
    env.RESUME_SESSION_ID = session;
  }
  return { scriptPath: LAUNCHER_SCRIPT, sandbox: request.sandbox || DEFAULT_AGENT_SANDBOX[runtime], env };
}
