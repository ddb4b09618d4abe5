/** The real agents the gate launches itself: Codex CLI and Claude Code, each under the gate's own launcher. */
export const LAUNCHED_RUNTIMES = ['codex', 'claude-code'] as const;
export type LaunchedRuntime = (typeof LAUNCHED_RUNTIMES)[number];

/**
 * The agents a worker gate can start (docs/worker-gate.md#running-real-agents): `script` runs `dispatch_script_path` (the
 * simulated agent, or a launcher of the operator's own), the others a real tool.
 */
export const AGENT_RUNTIMES = ['script', ...LAUNCHED_RUNTIMES] as const;
export type AgentRuntime = (typeof AGENT_RUNTIMES)[number];

/**
 * Each tool's own values for the dispatch contract's `sandbox` ('' leaves the launcher's default): Codex's sandbox
 * modes, Claude Code's permission modes.
 */
export const AGENT_SANDBOXES: Readonly<Record<LaunchedRuntime, readonly string[]>> = {
  codex: ['read-only', 'workspace-write', 'danger-full-access'],
  'claude-code': ['default', 'acceptEdits', 'plan', 'bypassPermissions'],
};

/** The sandbox a launcher uses when the dispatch leaves it empty. */
export const DEFAULT_AGENT_SANDBOX: Readonly<Record<LaunchedRuntime, string>> = {
  codex: 'workspace-write',
  'claude-code': 'acceptEdits',
};

/** A session id an agent tool gives out: what a resume may name. */
export const AGENT_SESSION_ID = /^[A-Za-z0-9-]{8,64}$/;

/** Why a dispatch's options do not suit the runtime; empty when they do. */
export function dispatchOptionProblems(runtime: AgentRuntime, options: { sandbox: string }): string[] {
  if (runtime === 'script') return [];
  const sandboxes = AGENT_SANDBOXES[runtime];
  if (options.sandbox !== '' && !sandboxes.includes(options.sandbox)) {
    return [`sandbox ${JSON.stringify(options.sandbox)} is not one of ${runtime}'s: ${sandboxes.join(', ')} (or '' for ${DEFAULT_AGENT_SANDBOX[runtime]})`];
  }
  return [];
}

/** Tokens an agent spent, as its tool reports them. */
export interface TokenUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}
