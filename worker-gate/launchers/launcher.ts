/**
 * The gate's launcher for real agents (docs/worker-gate.md#running-real-agents). The gate runs it as the dispatch script of a run
 * whose agent_runtime is a real tool, with the dispatch environment plus AGENT_RUNTIME, AGENT_BINARY, AGENT_HOME and,
 * for a resume, RESUME_SESSION_ID.
 *
 * Invoked so, it is the *launcher*: it starts itself again with `--agent`, detached (its own process group), prints
 * `{"root_pid":…,"process_group_id":…}` and exits. With `--agent` it is the *runner*: it writes the tool's isolated
 * home (config and lifecycle hooks that post to the gate), starts the tool in its process group, keeps the tool's
 * event stream in the gate's records of the project (AGENT_RECORDS, under state_dir: never where the agent writes),
 * and when the tool exits records the session (id, last message, exit code, token usage) and posts `session-end` with
 * the exit code, so a run's end is seen even when the tool sends no end hook. The only file it reads in the project is
 * the prompt, through the directory the gate pinned, without following a link.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, createWriteStream } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { AGENT_SESSION_ID, LAUNCHED_RUNTIMES, type LaunchedRuntime, type TokenUsage } from '../contract/agent-runtimes.ts';
import { RESUME_PROMPT_MAX, ToolRuleSchema } from '../contract/agent-question.ts';
import { toolEndCause } from '../contract/run-cause.ts';
import { PinnedDir } from '../../platform/files/pinned-dir.ts';
import {
  AGENT_FLAG,
  checkWorkspaceOrExit,
  createEventPoster,
  dispatchEnvSchema,
  launchDetachedAgent,
  log,
  parseEnvOrExit,
  reportLaunched,
  typeStrippingLoader,
  type DispatchEnv,
} from '../agent-kit.ts';
import { AGENT_SANDBOX_PLAN_ENV, agentSandboxPlanFromEnv } from '../agent-sandbox/index.ts';
import { claudeCodeLauncher } from './claude-code.ts';
import { codexLauncher } from './codex.ts';
import { AGENT_RECORD_FILES, AgentRecords, type AgentSessionRecord } from './records.ts';
import { launchInTmux } from './tmux.ts';
import { openToolHome, sandboxedToolPid, toolArgv } from './tool-sandbox.ts';
import type { AgentStreamState, RuntimeLauncher } from './runtime-launcher.ts';

const LAUNCHERS: Record<LaunchedRuntime, RuntimeLauncher> = { codex: codexLauncher, 'claude-code': claudeCodeLauncher };

const launcherEnvSchema = z.object({
  AGENT_RUNTIME: z.enum(LAUNCHED_RUNTIMES),
  AGENT_BINARY: z.string().min(1),
  AGENT_HOME: z.string().min(1),
  /** The gate's records of the project (session.json, events.jsonl, stderr.log, agent.log), under its state_dir. */
  AGENT_RECORDS: z.string().min(1),
  AGENT_STATE_DIR: z.string().min(1),
  RESUME_SESSION_ID: z.string().regex(AGENT_SESSION_ID).optional(),
  /** A resume's prompt (an operator's answer), given by the gate instead of the run's prompt file. */
  RESUME_PROMPT: z.string().min(1).max(RESUME_PROMPT_MAX).optional(),
  /** Tools the session may use without asking (JSON list of rules in Claude Code's --allowedTools form). */
  ALLOWED_TOOLS: z
    .string()
    .max(64 * 1024)
    .optional()
    .transform((text, context) => {
      if (text === undefined) return [];
      const parsed = z.array(ToolRuleSchema).max(100).safeParse(safeJson(text));
      if (parsed.success) return parsed.data;
      context.addIssue({ code: 'custom', message: 'must be a JSON list of tool rules' });
      return z.NEVER;
    }),
  TOKEN_BUDGET: z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
  /** '1': the runner starts in a tmux session named after the run (agent_tmux_enabled). */
  AGENT_TMUX: z.enum(['0', '1']).default('0'),
});

/** The tool's event stream and stderr are kept up to these sizes: an agent's output is bounded like everything it makes. */
const MAX_EVENT_LOG_BYTES = 16 * 1024 * 1024;
const MAX_STDERR_BYTES = 1024 * 1024;
const MAX_PROMPT_BYTES = 1024 * 1024;
/** The most a prompt file may hold to be read at all (prepare-project writes at most 512 Ki characters). */
const MAX_PROMPT_FILE_BYTES = 4 * 1024 * 1024;
/** What a tmux pane appends to agent.log: the tool's output shown there is the agent's, and bounded like it. */
const MAX_PANE_LOG_BYTES = 16 * 1024 * 1024;
const MAX_RECORDED_TEXT = 20_000;

const HOOK_SCRIPT = fileURLToPath(new URL('./gate-event-hook.mjs', import.meta.url));
const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** A file, open at `fd`, that takes at most `limit` bytes and drops the rest. */
function boundedLog(fd: number, limit: number): { write(chunk: Buffer): void; end(): Promise<void> } {
  const stream = createWriteStream('', { fd, autoClose: true });
  let written = 0;
  return {
    write(chunk) {
      if (written >= limit) return;
      const part = chunk.subarray(0, limit - written);
      written += part.length;
      stream.write(part);
    },
    end: () => new Promise((done) => stream.end(done)),
  };
}

const SIGNAL_NUMBERS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };

/** How often the runner reads a tool's usage outside its stream: a budget stop comes well within 2 s of the answer past it. */
const USAGE_POLL_MS = 200;

/** How long each signal of a budget stop has before the next: SIGINT lets the tool end its session, then TERM, then KILL. */
const BUDGET_STOP_GRACE_MS = 10_000;

/**
 * Stops the tool once it has spent more than its budget: SIGINT first, so that it ends its session (and fires its end
 * hook), then SIGTERM and SIGKILL if it is still there. Answers whether it stopped the tool.
 */
function budgetGuard(
  child: ChildProcess,
  budget: number | undefined,
  toolPid: () => number | null,
): { check(usage: TokenUsage | null): void; exceeded(): boolean; stoppedAt(): string | null } {
  let stoppedAt: string | null = null;
  let stopping = false;
  // SIGINT and SIGTERM go to the tool itself: bwrap, the runner's child, dies of them at once and takes the tool along.
  const signalTool = (signal: NodeJS.Signals) => {
    const pid = toolPid();
    if (pid === null || pid === child.pid) return child.kill(signal);
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  };
  return {
    check(usage) {
      if (stopping || budget === undefined || usage === null || usage.total_tokens <= budget) return;
      stopping = true;
      stoppedAt = new Date().toISOString();
      log(`token budget exceeded: ${usage.total_tokens} tokens spent of ${budget}; stopping the agent (SIGINT, then SIGTERM and SIGKILL)`);
      signalTool('SIGINT');
      const escalate = (signal: NodeJS.Signals, afterMs: number) =>
        setTimeout(() => child.exitCode === null && child.signalCode === null && (signal === 'SIGKILL' ? child.kill(signal) : signalTool(signal)), afterMs).unref();
      escalate('SIGTERM', BUDGET_STOP_GRACE_MS);
      escalate('SIGKILL', 2 * BUDGET_STOP_GRACE_MS);
    },
    exceeded: () => stopping,
    stoppedAt: () => stoppedAt,
  };
}

/** How often, at most, the runner tells the gate that the tool moves: the gate's stall clock needs no finer grain. */
const PROGRESS_REPORT_MS = 10_000;

/**
 * Tells the gate, at most every PROGRESS_REPORT_MS, that the tool showed progress (a stream line: a model answer or a
 * tool event; a usage change): a tool waiting on a model that never answers shows none, and the gate stops it.
 */
function progressReporter(env: DispatchEnv, usage: () => TokenUsage | null): { saw(): void; stop(): void } {
  // No session id: the gate's record of the session is the tool's hooks' to start; a progress report changes no state.
  const poster = createEventPoster(env, '', 0);
  let lastSentAt = 0;
  let timer: NodeJS.Timeout | undefined;
  const send = () => {
    timer = undefined;
    lastSentAt = Date.now();
    const spent = usage();
    void poster.post('progress', 'the tool moves', spent ? { token_usage: spent } : {});
  };
  return {
    saw() {
      if (timer) return;
      timer = setTimeout(send, Math.max(0, lastSentAt + PROGRESS_REPORT_MS - Date.now()));
    },
    stop: () => clearTimeout(timer),
  };
}

async function runAgent(env: DispatchEnv, launcherEnv: z.output<typeof launcherEnvSchema>): Promise<void> {
  const launcher = LAUNCHERS[launcherEnv.AGENT_RUNTIME]!;
  const records = AgentRecords.open(launcherEnv.AGENT_RECORDS);
  const startedAt = new Date().toISOString();
  const prompt = launcherEnv.RESUME_PROMPT ?? readPrompt(env).subarray(0, MAX_PROMPT_BYTES).toString('utf8');
  const plan = agentSandboxPlanFromEnv(process.env);
  const home = openToolHome(launcherEnv.AGENT_HOME, launcherEnv.AGENT_STATE_DIR, plan);
  const request = {
    prompt,
    model: env.MODEL,
    reasoningEffort: env.REASONING_EFFORT,
    sandbox: env.SANDBOX,
    resumeSessionId: env.DISPATCH_MODE === 'resume' ? (launcherEnv.RESUME_SESSION_ID ?? null) : null,
    allowedTools: launcherEnv.ALLOWED_TOOLS,
    home: home.seen,
    homeOnHost: home.onHost,
  };
  const hookCommand = (event: string) => `${shellQuote(process.execPath)} ${shellQuote(HOOK_SCRIPT)} ${event}`;
  const toolEnv = {
    ...withoutLauncherSettings(process.env),
    ...launcher.prepareHome(request, hookCommand, process.env, (name, content) => home.dir.writeFileAtomic(name, content, 0o644)),
  };
  home.dir.close();
  const [command, ...args] = toolArgv(plan, launcherEnv.AGENT_BINARY, launcher.argv(request), home);
  const state: AgentStreamState = { sessionId: launcherEnv.RESUME_SESSION_ID ?? null, lastMessage: null, lastError: null, tokenUsage: null };
  const events = boundedLog(records.openLog(AGENT_RECORD_FILES.events, { fresh: true }), MAX_EVENT_LOG_BYTES);
  const stderr = boundedLog(records.openLog(AGENT_RECORD_FILES.stderr, { fresh: true }), MAX_STDERR_BYTES);
  // The gate signals the whole group; the runner stays to record how the tool ended and to post it.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => log(`${signal} received; waiting for ${launcher.runtime} to end`));

  log(`starting ${launcher.runtime} (${env.DISPATCH_MODE})`);
  // In this process's directory: the project the gate pinned (bwrap, when there is one, starts the tool there too).
  const child = spawn(command!, args, { env: toolEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const budget = budgetGuard(child, launcherEnv.TOKEN_BUDGET, () => (child.pid === undefined ? null : sandboxedToolPid(child.pid, plan)));
  // A resumed Codex session's stream reports the whole thread, its earlier sessions included (measured with 0.169: three
  // answers, two of them before the resume, read 300 input tokens): the watcher counts this invocation alone.
  const resumed = request.resumeSessionId !== null;
  const usageWatcher = launcherEnv.TOKEN_BUDGET === undefined && !resumed ? undefined : launcher.watchUsage?.(request, startedAt);
  // What the tool's stream reported, or what the watcher read where that is more (the stream may report only at the end).
  let watchedUsage: TokenUsage | null = null;
  const spent = () => {
    if (resumed && watchedUsage) return watchedUsage;
    return watchedUsage && watchedUsage.total_tokens > (state.tokenUsage?.total_tokens ?? 0) ? watchedUsage : state.tokenUsage;
  };
  const progress = progressReporter(env, spent);
  const watching = usageWatcher
    ? setInterval(() => {
        const before = watchedUsage?.total_tokens;
        watchedUsage = usageWatcher.poll(state.sessionId) ?? watchedUsage;
        if (watchedUsage && watchedUsage.total_tokens !== before) progress.saw();
        budget.check(spent());
      }, USAGE_POLL_MS)
    : undefined;
  let pending = '';
  child.stdout.on('data', (chunk: Buffer) => {
    events.write(chunk);
    const lines = (pending + chunk.toString('utf8')).split('\n');
    pending = lines.pop() ?? '';
    if (pending.length > 1024 * 1024) pending = '';
    for (const line of lines) launcher.readStreamLine(line, state);
    if (lines.some((line) => line.trim() !== '')) progress.saw();
    budget.check(spent());
  });
  child.stderr.on('data', (chunk: Buffer) => stderr.write(chunk));
  // In tmux, the pane is the operator's window on the agent: it shows the tool's own output too.
  if (launcherEnv.AGENT_TMUX === '1') {
    child.stdout.on('data', (chunk: Buffer) => process.stdout.write(chunk));
    child.stderr.on('data', (chunk: Buffer) => process.stdout.write(chunk));
  }
  const ended = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error: string | null }>((done) => {
    child.once('error', (error) => done({ code: null, signal: null, error: error.message }));
    child.once('close', (code, signal) => done({ code, signal, error: null }));
  });
  clearInterval(watching);
  progress.stop();
  watchedUsage = usageWatcher?.poll(state.sessionId) ?? watchedUsage;
  usageWatcher?.close();
  if (pending) launcher.readStreamLine(pending, state);
  await Promise.all([events.end(), stderr.end()]);
  const exitCode = ended.code ?? (ended.signal ? 128 + (SIGNAL_NUMBERS[ended.signal] ?? 0) : 127);
  const record: AgentSessionRecord = {
    runtime: launcher.runtime,
    run_id: env.RUN_ID,
    mode: env.DISPATCH_MODE,
    session_id: state.sessionId,
    exit_code: exitCode,
    signal: ended.signal,
    last_message: state.lastMessage?.slice(0, MAX_RECORDED_TEXT) ?? null,
    last_error: (ended.error ?? state.lastError)?.slice(0, MAX_RECORDED_TEXT) ?? null,
    token_usage: spent(),
    token_budget: launcherEnv.TOKEN_BUDGET ?? null,
    stopped_over_budget: budget.exceeded(),
    budget_stopped_at: budget.stoppedAt(),
    started_at: startedAt,
    ended_at: new Date().toISOString(),
  };
  records.writeSession(record);
  records.close();
  log(`${launcher.runtime} exited with ${exitCode}${ended.signal ? ` (${ended.signal})` : ''}`);
  const poster = createEventPoster(env, state.sessionId ?? '');
  await poster.post('session-end', `${launcher.runtime} exited with status ${exitCode}`, {
    exit_code: exitCode,
    ...(spent() ? { token_usage: spent() } : {}),
    ...(budget.exceeded() ? { token_budget_exceeded: launcherEnv.TOKEN_BUDGET } : {}),
    cause: toolEndCause({ exitCode, signal: ended.signal, lastError: state.lastError, spawnError: ended.error, stoppedOverBudget: budget.exceeded() }),
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** What only the launcher reads: the tool gets none of it (its sandbox's plan least of all). */
const LAUNCHER_SETTINGS = [...Object.keys(launcherEnvSchema.shape), AGENT_SANDBOX_PLAN_ENV];

function withoutLauncherSettings(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const kept = { ...env };
  for (const name of LAUNCHER_SETTINGS) delete kept[name];
  return kept;
}

async function main(): Promise<void> {
  const env = parseEnvOrExit(dispatchEnvSchema, process.env, 'launcher');
  const launcherEnv = parseEnvOrExit(launcherEnvSchema, process.env, 'launcher');
  if (process.argv.includes(AGENT_FLAG)) {
    await runAgent(env, launcherEnv);
    return;
  }
  checkWorkspaceOrExit(env, 'launcher');
  const runner = fileURLToPath(import.meta.url);
  const records = AgentRecords.open(launcherEnv.AGENT_RECORDS);
  const agentLog = records.openLog(AGENT_RECORD_FILES.agentLog, { fresh: true });
  if (launcherEnv.AGENT_TMUX === '1') {
    closeSync(agentLog);
    records.close();
    const logPath = `${launcherEnv.AGENT_RECORDS}/${AGENT_RECORD_FILES.agentLog}`;
    reportLaunched(launchInTmux({ runId: env.RUN_ID, argv: [process.execPath, ...typeStrippingLoader(runner), runner, AGENT_FLAG], cwd: env.PROJECT_DIR, logPath, maxLogBytes: MAX_PANE_LOG_BYTES }));
  }
  const launched = launchDetachedAgent(runner, env.PROJECT_DIR, agentLog);
  closeSync(agentLog);
  records.close();
  reportLaunched(launched);
}

/** The prompt, read once through the project the gate pinned (this process's directory), no link followed. */
function readPrompt(env: DispatchEnv): Buffer {
  const project = PinnedDir.current();
  try {
    const prompt = project.readFileIfExists(relative(env.PROJECT_DIR, env.PROMPT_FILE), MAX_PROMPT_FILE_BYTES);
    if (prompt === null) throw new Error(`the prompt file ${env.PROMPT_FILE} is gone`);
    return prompt;
  } finally {
    project.close();
  }
}

await main();
