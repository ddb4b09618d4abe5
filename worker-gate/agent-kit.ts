/**
 * What every dispatch script of this repository shares (the simulated agent, and the tests' fake agent): the dispatch
 * environment the gate sets (docs/worker-gate.md#worker-gate, dispatch contract), the launcher/agent split (the launcher starts
 * itself again detached with `--agent` and prints the pid JSON), and lifecycle posts that outlast a gate restart
 * (docs/worker-gate.md#worker-gate).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, closeSync, constants, mkdirSync, openSync, statSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import { DISPATCH_MODES, REASONING_EFFORTS, type AgentEvent } from './contract/gate-names.ts';

/** Argument that switches a dispatch script into agent mode. */
export const AGENT_FLAG = '--agent';

const nonEmpty = z.string().trim().min(1, 'must not be empty');

/** The dispatch environment set by the worker gate (docs/worker-gate.md#worker-gate, dispatch contract). */
export const dispatchEnvSchema = z.object({
  RUN_ID: nonEmpty,
  PROJECT_ID: nonEmpty,
  PROJECT_DIR: nonEmpty,
  PROMPT_FILE: nonEmpty,
  DISPATCH_MODE: z.enum(DISPATCH_MODES),
  MODEL: z.string(),
  REASONING_EFFORT: z.enum(REASONING_EFFORTS),
  SANDBOX: z.string(),
  GATE_EVENT_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
  GATE_EVENT_TOKEN: nonEmpty,
});
export type DispatchEnv = z.infer<typeof dispatchEnvSchema>;

/**
 * Parses the dispatch environment. On failure writes one line per problem to stderr, naming the
 * variable but never its value (the token is a secret), and exits 2.
 */
export function parseEnvOrExit<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv, who: string): z.output<S> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    const name = issue.path.join('.') || '(environment)';
    const missing = issue.path.length === 1 && env[String(issue.path[0])] === undefined;
    const message = missing ? 'is required' : issue.message;
    return `  ${name}: ${message}`;
  });
  process.stderr.write(`${who}: invalid dispatch environment:\n${problems.join('\n')}\n`);
  process.exit(2);
}

/** `<project_dir>/.research/agent.log`, where a detached agent's stdout and stderr go. */
export function agentLogPath(projectDir: string): string {
  return join(projectDir, '.research', 'agent.log');
}

/**
 * Starts `scriptPath --agent` detached (own process group, pgid = pid) with stdio on the agent log,
 * so the gate's stdout pipe closes as soon as the launcher exits. Node 24 runs this file as it is; older Node loads it
 * through tsx, resolved from this module rather than from cwd, so the agent starts from any project directory.
 */
/** A TypeScript script on a Node that cannot strip types needs the tsx loader (a development dependency). */
export function typeStrippingLoader(scriptPath: string): string[] {
  const stripsTypes = typeof (process.features as { typescript?: unknown }).typescript === 'string';
  return scriptPath.endsWith('.ts') && !stripsTypes ? ['--import', import.meta.resolve('tsx')] : [];
}

export function launchDetachedAgent(
  scriptPath: string,
  projectDir: string,
  /** Where its output goes instead, held open (the gate's launcher keeps it in its own records); the caller closes it. */
  logFd?: number,
): { root_pid: number; process_group_id: number } {
  const ownLog = logFd === undefined;
  if (ownLog) mkdirSync(dirname(agentLogPath(projectDir)), { recursive: true });
  const output = logFd ?? openSync(agentLogPath(projectDir), 'a');
  try {
    const child = spawn(process.execPath, [...typeStrippingLoader(scriptPath), scriptPath, AGENT_FLAG], {
      // With its own log, it starts in this process's directory: the project the gate pinned, not a path walked again.
      ...(ownLog ? { cwd: projectDir } : {}),
      detached: true,
      stdio: ['ignore', output, output],
      env: process.env,
    });
    if (child.pid === undefined) throw new Error(`could not start the agent process (${process.execPath})`);
    child.on('error', () => undefined);
    child.unref();
    return { root_pid: child.pid, process_group_id: child.pid };
  } finally {
    if (ownLog) closeSync(output);
  }
}

/**
 * Checks, before anything starts, that PROJECT_DIR is a directory and PROMPT_FILE (relative to it)
 * is readable; otherwise a message on stderr and exit 2.
 */
export function checkWorkspaceOrExit(env: DispatchEnv, who: string): void {
  const problems: string[] = [];
  try {
    if (!statSync(env.PROJECT_DIR).isDirectory()) problems.push(`  PROJECT_DIR: ${env.PROJECT_DIR} is not a directory`);
  } catch {
    problems.push(`  PROJECT_DIR: ${env.PROJECT_DIR} does not exist`);
  }
  if (problems.length === 0) {
    try {
      accessSync(resolve(env.PROJECT_DIR, env.PROMPT_FILE), constants.R_OK);
    } catch {
      problems.push(`  PROMPT_FILE: ${env.PROMPT_FILE} is not a readable file`);
    }
  }
  if (problems.length === 0) return;
  process.stderr.write(`${who}: invalid dispatch environment:\n${problems.join('\n')}\n`);
  process.exit(2);
}

/** Prints the one JSON object the gate reads and exits 0. */
export function reportLaunched(launched: { root_pid: number; process_group_id: number }): never {
  process.stdout.write(`${JSON.stringify(launched)}\n`);
  process.exit(0);
}

export interface EventPoster {
  sessionId: string;
  post(event: AgentEvent, message: string, extra?: Record<string, unknown>): Promise<boolean>;
}

const POST_TIMEOUT_MS = 3_000;
const FIRST_RETRY_MS = 250;
const LONGEST_RETRY_MS = 10_000;

/**
 * How long an agent keeps retrying a lifecycle post while the gate cannot take it (docs/worker-gate.md#worker-gate, agent
 * contract): `AGENT_EVENT_RETRY_SEC` in the gate's environment, which its agents inherit; 10 minutes by default.
 */
export const eventRetryEnvSchema = z.object({
  AGENT_EVENT_RETRY_SEC: z.coerce.number().min(0).max(86_400).default(600),
});

export function log(line: string): void {
  process.stdout.write(`${new Date().toISOString()} ${line}\n`);
}

/** Exponential backoff with jitter: about 250 ms, 500 ms, 1 s, … up to 10 s between attempts. */
function retryDelayMs(attempt: number): number {
  const ceiling = Math.min(LONGEST_RETRY_MS, FIRST_RETRY_MS * 2 ** (attempt - 1));
  return Math.round(ceiling * (0.5 + Math.random() / 2));
}

/**
 * Posts lifecycle events to GATE_EVENT_URL with the bearer token. Network errors, timeouts, 429 and 5xx are
 * retried with backoff for `retryForSec` (the gate may be restarting, and a lost event would end the run in
 * `gate_error`); any other answer is final. A post that finally fails is logged and reported as false; it never throws.
 */
export function createEventPoster(env: DispatchEnv, sessionId: string, retryForSec = parseEnvOrExit(eventRetryEnvSchema, process.env, 'agent').AGENT_EVENT_RETRY_SEC): EventPoster {
  return {
    sessionId,
    async post(event, message, extra = {}) {
      const body = JSON.stringify({
        event,
        run_id: env.RUN_ID,
        // '' when the agent has no session id yet: a made-up one would start the gate's record of the run over.
        session_id: sessionId || undefined,
        project_id: env.PROJECT_ID,
        timestamp: new Date().toISOString(),
        root_pid: process.pid,
        process_group_id: process.pid,
        message,
        ...extra,
      });
      const giveUpAt = Date.now() + retryForSec * 1000;
      for (let attempt = 1; ; attempt += 1) {
        let problem: string;
        try {
          const response = await fetch(env.GATE_EVENT_URL, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${env.GATE_EVENT_TOKEN}` },
            body,
            signal: AbortSignal.timeout(POST_TIMEOUT_MS),
          });
          await response.text().catch(() => '');
          if (response.ok) {
            log(`posted ${event} (HTTP ${response.status}${attempt > 1 ? `, attempt ${attempt}` : ''})`);
            return true;
          }
          problem = `HTTP ${response.status}`;
          if (response.status !== 429 && response.status < 500) {
            log(`could not post ${event}: ${problem}`);
            return false;
          }
        } catch (error) {
          problem = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
        }
        const wait = retryDelayMs(attempt);
        if (Date.now() + wait > giveUpAt) {
          log(`could not post ${event} within ${retryForSec} s: ${problem}`);
          return false;
        }
        log(`post ${event} failed (${problem}); retrying in ${wait} ms`);
        await sleep(wait);
      }
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/**
 * Makes `dir` and the folders above it that are missing, as `mkdir -p` does, but with each folder tried at most twice.
 * Not Node's recursive mkdir: in the sandbox the project is a mount point, and once its folder is deleted (a test's temp
 * dir removed, a project wiped) that finds the mount point there and the folder below it missing, and tries again
 * without end at half a core. Here any failure but "it exists" is thrown.
 */
async function makeFolders(dir: string): Promise<void> {
  const absolute = resolve(dir);
  const parent = dirname(absolute);
  try {
    await mkdir(absolute);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    if (code !== 'ENOENT' || parent === absolute) throw error;
    await makeFolders(parent);
    await mkdir(absolute).catch(unlessItExists);
  }
}

function unlessItExists(error: NodeJS.ErrnoException): void {
  if (error.code !== 'EEXIST') throw error;
}

/** Writes a file so a reader sees either the old or the whole new content (tmp file + rename). */
export async function writeFileAtomic(path: string, content: string): Promise<void> {
  await makeFolders(dirname(path));
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, content);
  await rename(tmp, path);
}

export function newSessionId(prefix: string, runId: string): string {
  return `${prefix}-${runId}-${randomBytes(4).toString('hex')}`;
}
