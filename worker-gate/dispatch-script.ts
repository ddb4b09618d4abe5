import { spawn } from 'node:child_process';
import { DispatchScriptOutputSchema } from './contract/gate-endpoints.ts';
import type { z } from 'zod';

export type DispatchScriptOutput = z.output<typeof DispatchScriptOutputSchema>;

export type DispatchScriptResult =
  | { ok: true; output: DispatchScriptOutput; duration_ms: number }
  | { ok: false; status: 502 | 504; detail: { message: string; exit_code: number | null; signal: string | null; stderr_tail: string; stdout_head: string } };

export interface DispatchScriptOptions {
  scriptPath: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  /**
   * Run before the script, which is appended as the last argument: `[...argvPrefix, scriptPath]`. The run's cgroup
   * join comes first (worker-gate/run-cgroups), then what switches user and sandboxes; each execs the rest.
   */
  argvPrefix?: readonly string[];
  /** Called with the script's pid as soon as it runs: the process, its session and its descendants are the gate's own. */
  onSpawn?: (pid: number) => void;
}

const STDOUT_LIMIT = 64 * 1024;
const STDERR_TAIL = 2000;
// After the script exits, its last output may still be in the pipe: on a loaded machine this process can take well
// over a second to read it. The agent the script backgrounds may also have inherited stdout, keeping the pipe open for
// good; so the wait ends as soon as the output holds the JSON object, and after this long at most.
const DRAIN_AFTER_EXIT_MS = 5_000;

function parseOutput(stdout: string): DispatchScriptOutput | null {
  const trimmed = stdout.trim();
  const candidates = [trimmed, trimmed.split('\n').filter((line) => line.trim() !== '').at(-1) ?? ''];
  for (const candidate of candidates) {
    try {
      const parsed = DispatchScriptOutputSchema.safeParse(JSON.parse(candidate));
      if (parsed.success) return parsed.data;
    } catch {
      // not JSON; try the next candidate
    }
  }
  return null;
}

/**
 * Runs the dispatch script directly (no shell) in its own process group and reads the one JSON object it prints.
 * Non-zero exit or unusable output → 502; still running at the deadline → its group is killed and 504.
 */
export function runDispatchScript(options: DispatchScriptOptions): Promise<DispatchScriptResult> {
  const started = Date.now();
  return new Promise((resolvePromise) => {
    let stdout = '';
    let stderr = '';
    let settled = false;
    let timedOut = false;
    const [command = options.scriptPath, ...args] = [...(options.argvPrefix ?? []), options.scriptPath];
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    if (child.pid !== undefined) options.onSpawn?.(child.pid);
    const fail = (message: string, exitCode: number | null, signal: string | null, status: 502 | 504 = 502) =>
      finish({
        ok: false,
        status,
        detail: { message, exit_code: exitCode, signal, stderr_tail: stderr.slice(-STDERR_TAIL), stdout_head: stdout.slice(0, 500) },
      });
    const finish = (result: DispatchScriptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      child.stdout.destroy();
      child.stderr.destroy();
      resolvePromise(result);
    };
    const deadline = setTimeout(() => {
      timedOut = true;
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      fail(`dispatch script did not finish within ${options.timeoutMs / 1000} s`, null, 'SIGKILL', 504);
    }, options.timeoutMs);

    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      if (stdout.length < STDOUT_LIMIT) stdout += chunk.slice(0, STDOUT_LIMIT - stdout.length);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_TAIL * 2);
    });
    child.on('error', (error: NodeJS.ErrnoException) => fail(`dispatch script could not be started: ${error.code ?? error.message}`, null, null));
    child.on('exit', (code, signal) => {
      if (timedOut) return;
      const conclude = () => {
        if (code !== 0) return fail(`dispatch script exited with ${code === null ? `signal ${signal}` : `status ${code}`}`, code, signal);
        const output = parseOutput(stdout);
        if (!output) return fail('dispatch script did not print one JSON object', code, signal);
        finish({ ok: true, output, duration_ms: Date.now() - started });
      };
      if (child.stdout.readableEnded || (code === 0 && parseOutput(stdout))) return conclude();
      const drained = setTimeout(conclude, DRAIN_AFTER_EXIT_MS);
      const concludeNow = () => {
        clearTimeout(drained);
        conclude();
      };
      child.stdout.once('end', concludeNow);
      if (code === 0) child.stdout.on('data', () => (parseOutput(stdout) ? concludeNow() : undefined));
    });
  });
}
