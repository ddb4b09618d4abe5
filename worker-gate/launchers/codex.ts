/**
 * Codex CLI under the gate (docs/worker-gate.md#running-real-agents): its isolated CODEX_HOME (config, hooks and their trust),
 * its command line for exec and resume, and what its `--json` stream tells about the run. Facts this relies on:
 * Codex POSTs to `{base_url}/responses` (Responses API only), reads the key from the variable its provider's
 * `env_key` names, skips untrusted hooks silently, and trusts a hook whose `[hooks.state."<hooks.json>:<event>:<group>:
 * <handler>"]` entry holds the sha256 of the canonical JSON of the handler's identity.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { TokenUsage } from '../contract/agent-runtimes.ts';
import { CodexRolloutUsage } from './codex-rollout.ts';
import type { AgentStreamState, LaunchRequest, RuntimeLauncher } from './runtime-launcher.ts';

/** Hook events Codex fires in exec mode, with the labels its trust keys use. */
const HOOK_EVENTS = {
  SessionStart: 'session_start',
  PreToolUse: 'pre_tool_use',
  Stop: 'stop',
  SessionEnd: 'session_end',
} as const;

/**
 * How long Codex lets each hook run. It clamps SessionEnd's to 3 s, and a declared timeout is part of the trusted hash, so
 * the others declare 3 s too; PreToolUse, which carries a question to the gate, gets 10 s (gate-event-hook.mjs).
 */
const hookTimeoutSec = (event: string) => (event === 'PreToolUse' ? 10 : 3);
const PROVIDER = 'rcp';

/** Sorted keys, no spaces: the form whose sha256 Codex compares with a trust entry. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

const tomlString = (text: string) => JSON.stringify(text);

/** `config.toml`: the provider, nothing fetched but the model, no retries against a dead server, hooks trusted. */
export function codexConfigToml(options: { baseUrl: string | undefined; apiKeyVariable: string; hooksPath: string; hookCommand: (event: string) => string }): string {
  const lines = [
    'check_for_update_on_startup = false',
    ...(options.baseUrl
      ? [
          `model_provider = ${tomlString(PROVIDER)}`,
          '',
          `[model_providers.${PROVIDER}]`,
          `name = ${tomlString(PROVIDER)}`,
          `base_url = ${tomlString(options.baseUrl)}`,
          `env_key = ${tomlString(options.apiKeyVariable)}`,
          'wire_api = "responses"',
          'request_max_retries = 0',
          'stream_max_retries = 0',
        ]
      : []),
    '',
    '[features]',
    'plugins = false',
    'unbounded_connection_retries = false',
    '',
    '[analytics]',
    'enabled = false',
  ];
  for (const [event, label] of Object.entries(HOOK_EVENTS)) {
    const identity = {
      event_name: label,
      ...(event === 'SessionStart' ? { matcher: 'startup|resume' } : {}),
      hooks: [{ type: 'command', command: options.hookCommand(event), timeout: hookTimeoutSec(event), async: false }],
    };
    const hash = createHash('sha256').update(canonicalJson(identity)).digest('hex');
    lines.push('', `[hooks.state.${tomlString(`${options.hooksPath}:${label}:0:0`)}]`, `trusted_hash = ${tomlString(`sha256:${hash}`)}`);
  }
  return `${lines.join('\n')}\n`;
}

/** `hooks.json`: one command handler per event, each posting to the gate (worker-gate/launchers/gate-event-hook.mjs). */
export function codexHooksJson(hookCommand: (event: string) => string): string {
  const hooks = Object.fromEntries(
    Object.keys(HOOK_EVENTS).map((event) => [
      event,
      [{ ...(event === 'SessionStart' ? { matcher: 'startup|resume' } : {}), hooks: [{ type: 'command', command: hookCommand(event), timeout: hookTimeoutSec(event) }] }],
    ]),
  );
  return `${JSON.stringify({ hooks }, null, 2)}\n`;
}

export const codexLauncher: RuntimeLauncher = {
  runtime: 'codex',
  credentialVariables: ['OPENAI_API_KEY', 'OPENAI_BASE_URL'],

  prepareHome({ home }, hookCommand, env, write) {
    // The trust entries name hooks.json where Codex reads it: in its sandbox.
    write('hooks.json', codexHooksJson(hookCommand));
    write('config.toml', codexConfigToml({ baseUrl: env.OPENAI_BASE_URL, apiKeyVariable: 'OPENAI_API_KEY', hooksPath: join(home, 'hooks.json'), hookCommand }));
    return { CODEX_HOME: home };
  },

  argv(request: LaunchRequest) {
    const common = ['--skip-git-repo-check', '--json', ...(request.model ? ['-m', request.model] : []), '-c', `model_reasoning_effort=${tomlString(request.reasoningEffort)}`];
    // Resume has no --sandbox and runs read-only unless told otherwise.
    if (request.resumeSessionId) return ['exec', 'resume', ...common, '-c', `sandbox_mode=${tomlString(request.sandbox)}`, request.resumeSessionId, request.prompt];
    return ['exec', ...common, '--sandbox', request.sandbox, request.prompt];
  },

  watchUsage: ({ homeOnHost }, startedAt) => new CodexRolloutUsage(homeOnHost, startedAt),

  readStreamLine(line: string, state: AgentStreamState) {
    let event: { type?: unknown; thread_id?: unknown; usage?: unknown; item?: { type?: unknown; text?: unknown }; error?: { message?: unknown }; message?: unknown };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      return;
    }
    if (event.type === 'thread.started' && typeof event.thread_id === 'string') state.sessionId = event.thread_id;
    if (event.type === 'item.completed' && event.item?.type === 'agent_message' && typeof event.item.text === 'string') state.lastMessage = event.item.text;
    if (event.type === 'turn.completed') state.tokenUsage = addUsage(state.tokenUsage, usageOf(event.usage));
    if (event.type === 'turn.failed' && typeof event.error?.message === 'string') state.lastError = event.error.message;
  },
};

function usageOf(raw: unknown): TokenUsage {
  const record = (raw ?? {}) as Record<string, unknown>;
  const count = (name: string) => (typeof record[name] === 'number' && Number.isFinite(record[name]) ? Math.max(0, Math.round(record[name])) : 0);
  const input = count('input_tokens');
  const output = count('output_tokens');
  return { input_tokens: input, output_tokens: output, total_tokens: input + output };
}

export function addUsage(a: TokenUsage | null, b: TokenUsage): TokenUsage {
  if (!a) return b;
  return { input_tokens: a.input_tokens + b.input_tokens, output_tokens: a.output_tokens + b.output_tokens, total_tokens: a.total_tokens + b.total_tokens };
}
