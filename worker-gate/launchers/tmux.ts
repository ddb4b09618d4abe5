import { spawnSync } from 'node:child_process';

/**
 * The launcher's tmux mode (agent_tmux_enabled; docs/worker-gate.md#running-real-agents, tmux): the runner starts as the only
 * pane of a tmux session named after the run, on a tmux server of its own (`tmux -L <session>`), so an operator can
 * `tmux -L <session> attach -t <session>` and watch the agent work. A server of its own starts in `/` and ends with
 * the session: it never holds another run's project directory, and it never outlives the run.
 */

const MAX_SESSION_NAME = 100;
const TMUX_TIMEOUT_MS = 10_000;

/** tmux refuses `.` and `:` in a session name; the run id's other characters are kept. */
export function tmuxSessionName(runId: string): string {
  return `rcp-${runId.replace(/[^A-Za-z0-9_-]/g, '_')}`.slice(0, MAX_SESSION_NAME);
}

const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

function tmux(socket: string, args: string[]): string {
  const result = spawnSync('tmux', ['-L', socket, ...args], { cwd: '/', env: process.env, encoding: 'utf8', timeout: TMUX_TIMEOUT_MS });
  if (result.error) throw new Error(`tmux could not be run (is it installed?): ${result.error.message}`);
  if (result.status !== 0) throw new Error(`tmux ${args[0]} failed (status ${result.status}): ${result.stderr.trim()}`);
  return result.stdout;
}

/**
 * Starts `argv` as the pane of a new detached session, in `cwd`, its output also appended to `logPath` (at most
 * `maxLogBytes`; the gate's own records, where no link of the agent's is). The pane's
 * process is a session and group leader of its own: it is the run's root and its process group.
 */
export function launchInTmux(options: { runId: string; argv: string[]; cwd: string; logPath: string; maxLogBytes: number }): { root_pid: number; process_group_id: number; tmux_session: string } {
  const session = tmuxSessionName(options.runId);
  // exec: the pane's process is the runner itself, not a shell waiting on it. -P prints the new pane's pid at once,
  // however soon the runner ends.
  const created = tmux(session, ['new-session', '-d', '-P', '-F', '#{pane_pid}', '-s', session, '-x', '200', '-y', '50', '-c', options.cwd, `exec ${options.argv.map(shellQuote).join(' ')}`]);
  const panePid = Number(created.trim());
  if (!Number.isInteger(panePid) || panePid <= 0) throw new Error(`tmux named no pane process for session ${session}`);
  try {
    tmux(session, ['pipe-pane', '-t', session, `head -c ${options.maxLogBytes} >> ${shellQuote(options.logPath)}`]);
  } catch {
    // The runner already ended (its session with it): what it wrote went to the pane only.
  }
  return { root_pid: panePid, process_group_id: panePid, tmux_session: session };
}
