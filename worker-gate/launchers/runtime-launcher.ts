import type { AgentRuntime, TokenUsage } from '../contract/agent-runtimes.ts';

/** What a launcher starts the tool with: the dispatch contract, resolved. */
export interface LaunchRequest {
  prompt: string;
  model: string;
  reasoningEffort: string;
  sandbox: string;
  /** Set for `mode: resume`: the project's last recorded session. */
  resumeSessionId: string | null;
  /** Tools the session may use without asking, as an operator's answer allowed them (Claude Code's --allowedTools rules). */
  allowedTools: readonly string[];
  /** The tool's isolated home for this project, as the tool sees it (in its sandbox). */
  home: string;
  /** The same home where the launcher, outside the sandbox, reads it. */
  homeOnHost: string;
}

/** Writes one file of the tool's home, whole, never through a link left there (platform/files/pinned-dir.ts). */
export type HomeWriter = (name: string, content: string) => void;

/** What the runner learns from the tool's output stream while it runs. */
export interface AgentStreamState {
  sessionId: string | null;
  lastMessage: string | null;
  lastError: string | null;
  tokenUsage: TokenUsage | null;
}

/** One real agent tool, as the gate's launcher drives it (worker-gate/launchers/launcher.ts). */
export interface RuntimeLauncher {
  runtime: Exclude<AgentRuntime, 'script'>;
  /** The gate environment's variables this tool reads its model credentials and server from. */
  credentialVariables: readonly string[];
  /** Writes the tool's isolated home (config, hooks) and answers the variables that point the tool at it and configure it. */
  prepareHome(request: LaunchRequest, hookCommand: (event: string) => string, env: NodeJS.ProcessEnv, write: HomeWriter): Record<string, string>;
  argv(request: LaunchRequest): string[];
  /** Takes one line of the tool's machine-readable output into `state`. */
  readStreamLine(line: string, state: AgentStreamState): void;
  /**
   * For a tool whose stream reports usage only at the end of a turn: where else the runner reads its usage while it
   * works, polled every 200 ms, so that a token budget stops it before its next model request.
   */
  watchUsage?(request: LaunchRequest, startedAt: string): UsageWatcher;
}

/** The tool's token usage of this invocation so far, read from outside its stream. */
export interface UsageWatcher {
  poll(sessionId: string | null): TokenUsage | null;
  close(): void;
}
