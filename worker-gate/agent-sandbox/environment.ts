/**
 * The agent's environment is an allow-list (docs/security.md#security-model): what a process needs, the agents' own settings,
 * the run contract the gate sets, and the names the operator lists in agent_credential_env. Nothing else of the gate's
 * environment (its config paths, Temporal, Postgres and telemetry credentials, cloud keys) reaches any runtime.
 */

/** Taken from the gate's environment as they are, when set. HOME and TMPDIR are the sandbox's own, never the gate's. */
export const AGENT_ENV_ALLOW_LIST = [
  'PATH',
  'LANG',
  'LANGUAGE',
  'LC_ALL',
  'LC_CTYPE',
  'LC_MESSAGES',
  'TZ',
  'TERM',
  'COLORTERM',
  'NO_COLOR',
  'AGENT_EVENT_RETRY_SEC',
  'SIMULATED_AGENT_WORK_SEC',
  'SIMULATED_AGENT_STEPS',
] as const;

/** Set by the gate for every run (docs/worker-gate.md#worker-gate, dispatch contract), whatever the gate's environment holds. */
export const RUN_CONTRACT_ENV = [
  'RUN_ID',
  'PROJECT_ID',
  'PROJECT_DIR',
  'PROMPT_FILE',
  'DISPATCH_MODE',
  'MODEL',
  'REASONING_EFFORT',
  'SANDBOX',
  'TOKEN_BUDGET',
  // A run given GPUs (gpu_indices) sees only those; set then, over any value the allow-list would pass on.
  'CUDA_VISIBLE_DEVICES',
  'NVIDIA_VISIBLE_DEVICES',
  'GATE_EVENT_URL',
  'GATE_EVENT_TOKEN',
  'HOME',
  'USER',
  'LOGNAME',
  'TMPDIR',
] as const;

/** The service's own secrets: never passed, even when agent_credential_env names one of them. */
const NEVER_PASSED = new Set(['SVC_CONFIG', 'SVC_CONTROL_PLANE_CONFIG', 'RESEARCH_PROVIDER_API_KEY', 'PAPER_WRITER_API_KEY']);

export interface AgentIdentity {
  /** The agent's HOME: its own directory (worker-gate/agent-sandbox/agent-dirs.ts). */
  home: string;
  /** The user the agent runs as, for USER and LOGNAME. */
  user: string;
  /** The agent's temporary directory: the sandbox's own /tmp, or the gate's when there is no sandbox. */
  tmpdir: string;
}

/**
 * The agent's whole environment: the allow-list and `credentialEnv` (agent_credential_env) read from `base`, the
 * agent's identity, then the run contract, which wins over anything of the same name.
 */
export function agentEnvironment(base: NodeJS.ProcessEnv, contract: Record<string, string>, credentialEnv: readonly string[], identity: AgentIdentity): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of [...AGENT_ENV_ALLOW_LIST, ...credentialEnv]) {
    const value = base[name];
    if (value !== undefined && !NEVER_PASSED.has(name)) env[name] = value;
  }
  return { ...env, HOME: identity.home, USER: identity.user, LOGNAME: identity.user, TMPDIR: identity.tmpdir, ...contract };
}
