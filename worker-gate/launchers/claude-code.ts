/**
 * Claude Code under the gate (docs/worker-gate.md#running-real-agents): its isolated config directory, the hooks it is given with
 * `--settings`, its command line for a new session and a resume, and what its `stream-json` output tells about the
 * run. Facts this relies on: CLAUDE_CONFIG_DIR and HOME keep it out of the user's own ~/.claude; it posts to
 * `{ANTHROPIC_BASE_URL}/v1/messages`; CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 removes every other connection and
 * CLAUDE_CODE_MAX_RETRIES=0 makes it fail at once when the model server is down; as root it refuses
 * bypassPermissions unless IS_SANDBOX=1; in -p mode it fires SessionStart, PreToolUse, PermissionRequest, Stop and
 * SessionEnd (also on SIGINT and SIGTERM), each hook as an `sh -c` child.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { TokenUsage } from '../contract/agent-runtimes.ts';
import type { AgentStreamState, LaunchRequest, RuntimeLauncher } from './runtime-launcher.ts';

/** The hook events the gate follows (worker-gate/launchers/gate-event-hook.mjs maps them to gate events). */
const HOOK_EVENTS = ['SessionStart', 'PreToolUse', 'PermissionRequest', 'Stop', 'SessionEnd'] as const;
/** How long Claude Code lets each hook run: PermissionRequest carries a question to the gate and gets 10 s (gate-event-hook.mjs). */
const hookTimeoutSec = (event: string) => (event === 'PermissionRequest' ? 10 : 5);
const HOOKS_FILE = 'gate-hooks.json';

/** The settings given with `--settings`: one command hook per event, each posting to the gate. */
export function claudeHookSettings(hookCommand: (event: string) => string): string {
  const hooks = Object.fromEntries(HOOK_EVENTS.map((event) => [event, [{ hooks: [{ type: 'command', command: hookCommand(event), timeout: hookTimeoutSec(event) }] }]]));
  return `${JSON.stringify({ hooks }, null, 2)}\n`;
}

export const claudeCodeLauncher: RuntimeLauncher = {
  runtime: 'claude-code',
  credentialVariables: ['ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL'],

  prepareHome({ home, sandbox }, hookCommand, _env, write) {
    write(HOOKS_FILE, claudeHookSettings(hookCommand));
    return {
      CLAUDE_CONFIG_DIR: home,
      HOME: home,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      // A failed model call ends the agent, and the run, at once; the control plane decides about a retry.
      CLAUDE_CODE_MAX_RETRIES: '0',
      // The operator chose to skip every permission prompt; as root the tool accepts that only with this set.
      ...(sandbox === 'bypassPermissions' ? { IS_SANDBOX: '1' } : {}),
    };
  },

  argv(request: LaunchRequest) {
    return [
      '-p',
      request.prompt,
      '--output-format',
      'stream-json',
      '--verbose',
      ...(request.model ? ['--model', request.model] : []),
      '--effort',
      request.reasoningEffort,
      '--permission-mode',
      request.sandbox,
      '--settings',
      join(request.home, HOOKS_FILE),
      // One flag per rule: a rule such as `Bash(npm test)` holds spaces, which the list form would split.
      ...request.allowedTools.flatMap((rule) => ['--allowedTools', rule]),
      ...(request.resumeSessionId ? ['--resume', request.resumeSessionId] : ['--session-id', randomUUID()]),
    ];
  },

  readStreamLine(line: string, state: AgentStreamState) {
    let event: { type?: unknown; subtype?: unknown; session_id?: unknown; result?: unknown; is_error?: unknown; usage?: unknown; message?: { usage?: unknown } };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      return;
    }
    if (event.type === 'system' && event.subtype === 'init' && typeof event.session_id === 'string') state.sessionId = event.session_id;
    if (event.type === 'assistant') state.tokenUsage = addMessageUsage(state.tokenUsage, event.message?.usage);
    if (event.type === 'result') {
      if (typeof event.result === 'string') {
        if (event.is_error === true) state.lastError = event.result;
        else state.lastMessage = event.result;
      }
      // The result's usage is the whole invocation's, every message of it counted: it replaces the running sum.
      if (event.usage) state.tokenUsage = usageOf(event.usage);
    }
  },
};

/** Input counts the prompt cache's reads and writes too: the model processed those tokens. */
function usageOf(raw: unknown): TokenUsage {
  const record = (raw ?? {}) as Record<string, unknown>;
  const count = (name: string) => (typeof record[name] === 'number' && Number.isFinite(record[name]) ? Math.max(0, Math.round(record[name])) : 0);
  const input = count('input_tokens') + count('cache_creation_input_tokens') + count('cache_read_input_tokens');
  const output = count('output_tokens');
  return { input_tokens: input, output_tokens: output, total_tokens: input + output };
}

function addMessageUsage(sum: TokenUsage | null, raw: unknown): TokenUsage | null {
  if (!raw) return sum;
  const usage = usageOf(raw);
  if (!sum) return usage;
  return { input_tokens: sum.input_tokens + usage.input_tokens, output_tokens: sum.output_tokens + usage.output_tokens, total_tokens: sum.total_tokens + usage.total_tokens };
}
