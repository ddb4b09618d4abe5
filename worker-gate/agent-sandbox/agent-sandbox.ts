import { dirname, resolve } from 'node:path';
import type { AgentIsolation } from '../contract/agent-isolation.ts';
import { firstRunConfigPath } from '../../platform/config/first-run.ts';
import { agentHomeFor, agentOwnedDir, grantProject } from './agent-dirs.ts';
import { detectIsolation, type IsolationCapabilities, type IsolationSettings } from './capabilities.ts';
import { agentEnvironment } from './environment.ts';
import type { AgentSandboxPlan } from './plan.ts';
import { isWithin, nodeBinDir, realOrResolved, REPO_ROOT } from './sandbox-paths.ts';

/**
 * The config files of both roles this process was started with, and the first-run state directories (of the working
 * directory and of this checkout, which the sandbox shows read-only): never shown to an agent.
 */
export function gateConfigFiles(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd(), temporalTls: TemporalTlsFiles = {}): string[] {
  const named = [
    env.SVC_CONFIG,
    env.SVC_CONTROL_PLANE_CONFIG,
    // The Temporal client's key and certificate: a process with both roles holds them, and they may lie under /etc.
    env.TEMPORAL_TLS_CLIENT_KEY_PATH,
    env.TEMPORAL_TLS_CLIENT_CERT_PATH,
    temporalTls.temporal_tls_client_key_path,
    temporalTls.temporal_tls_client_cert_path,
  ].filter((path): path is string => !!path).map((path) => resolve(cwd, path));
  return [...named, dirname(firstRunConfigPath(cwd)), dirname(firstRunConfigPath(REPO_ROOT))];
}

/** The config fields naming the Temporal client's key files, where this process's config has them. */
export interface TemporalTlsFiles {
  temporal_tls_client_key_path?: string;
  temporal_tls_client_cert_path?: string;
}

export interface AgentSandboxSettings extends IsolationSettings {
  agent_credential_env: readonly string[];
}

/**
 * The gate's side of the agent sandbox (docs/security.md#security-model): what it detected at start, and for each run the plan
 * (user, sandbox, what it shows), the agent's own directories and its environment.
 */
export class AgentSandbox {
  private readonly settings: AgentSandboxSettings;
  private readonly capabilities: IsolationCapabilities;
  private readonly configFiles: string[];

  constructor(settings: AgentSandboxSettings, capabilities: IsolationCapabilities, configFiles: string[]) {
    this.settings = settings;
    this.capabilities = capabilities;
    this.configFiles = configFiles;
  }

  /** Detects once what this gate can do; the report says it plainly (start log, /control/health, /dashboard/api). */
  static detect(settings: AgentSandboxSettings & TemporalTlsFiles, configFiles = gateConfigFiles(process.env, process.cwd(), settings)): AgentSandbox {
    return new AgentSandbox(settings, detectIsolation(settings), configFiles);
  }

  report(): AgentIsolation {
    return this.capabilities.report;
  }

  /**
   * The plan for a run in `projectDir` (`projectReal`: the real path the gate pinned): its home is made (the agent user's own) and its project handed to the agent
   * user. `scriptDir` is the operator's dispatch script's directory, shown read-only for the script runtime; the prompt
   * is shown read-only where it lies outside the project.
   */
  prepareRun(projectDir: string, projectReal: string, promptFile: string, scriptDir: string | null): AgentSandboxPlan {
    const { settings, capabilities } = this;
    const plan: AgentSandboxPlan = {
      user: capabilities.user,
      setpriv: capabilities.setpriv,
      bwrap: capabilities.bwrap,
      project_dir: projectDir,
      project_source: projectReal,
      home_dir: agentHomeFor(settings.state_dir, projectDir),
      read_only: [REPO_ROOT, nodeBinDir(), ...(scriptDir ? [scriptDir] : []), ...settings.agent_read_only_paths].map(realOrResolved),
      writable: settings.agent_writable_paths.map(realOrResolved),
      shown_files: isWithin(realOrResolved(promptFile), projectReal) ? [] : [realOrResolved(promptFile)],
      hidden: [...this.configFiles, settings.state_dir, settings.project_root].map(realOrResolved),
      drop_capabilities: capabilities.user === null && process.getuid?.() === 0,
    };
    agentOwnedDir(plan.home_dir, settings.state_dir, plan);
    grantProject(settings.state_dir, settings.project_root, projectReal, plan);
    return plan;
  }

  /** The agent's environment (environment.ts): the allow-list, agent_credential_env and the run contract. */
  environment(base: NodeJS.ProcessEnv, contract: Record<string, string>, plan: AgentSandboxPlan): NodeJS.ProcessEnv {
    return agentEnvironment(base, contract, this.settings.agent_credential_env, {
      home: plan.home_dir,
      user: this.capabilities.report.runs_as,
      tmpdir: plan.bwrap ? '/tmp' : (base.TMPDIR ?? '/tmp'),
    });
  }
}

/** The directory of a script, for the sandbox to show it read-only. */
export function scriptDirOf(scriptPath: string): string {
  return dirname(realOrResolved(scriptPath));
}
