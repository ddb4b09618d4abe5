import { spawn } from 'node:child_process';
import { lstatSync, realpathSync } from 'node:fs';
import { lstat, mkdir, readdir, rmdir } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, posix, relative, resolve } from 'node:path';
import { EVIDENCE_CAPS } from '../../worker-gate/contract/evidence-caps.ts';
import { isStrictlyInside, PinnedDir, reachableInside } from '../../platform/files/pinned-dir.ts';

/**
 * Copies a run's paper evidence from a worker machine into the control plane's copy of the project, with rsync over
 * ssh. Evidence is exactly `run_notes.md`, `.research/decision.json` and everything under `results/`; nothing else is
 * copied, and nothing is written outside `<project_root>/<project_dir>`. rsync and ssh are run with argument arrays,
 * never through a shell: the host and the paths come from config and from the database.
 */

export interface EvidenceSyncSettings {
  /** '[user@]host', '[user@]host:port', 'ssh://[user@]host[:port]', or an alias from the user's ssh config. */
  ssh_host: string;
  /** Absolute path on the worker; the remote project is `<remote_root>/<project_dir>`. */
  remote_root: string;
  /** The whole command (connect and copy) is killed after this long. */
  timeout_ms: number;
  /** The control plane's own known_hosts file (host keys accepted on first use); its directory is created 0700. */
  known_hosts_file?: string;
  /** Variables laid over process.env for rsync and ssh (e.g. SSH_AUTH_SOCK of the agent holding the key). */
  env?: Record<string, string | undefined>;
}

export interface EvidenceSyncReport {
  ok: boolean;
  /** Where the evidence came from, e.g. 'root@127.0.0.1:2222:/srv/projects/p1' (no secrets). */
  source: string;
  /** The local project directory. */
  destination: string;
  /** The command line that was run, for the operator (program and arguments, quoted where needed); '' when none ran. */
  command: string;
  exit_code: number | null;
  timed_out: boolean;
  /** Evidence files present locally after the sync, relative to the project directory, sorted. */
  copied: string[];
  /** The evidence is over its caps (worker-gate/contract/evidence-caps.ts), on the worker or as copied: it counts as missing. */
  over_cap: boolean;
  /**
   * Why it failed (a reason, or the tail of rsync's and ssh's stderr); null on a clean success. On a partial
   * transfer that still counts as ok (rsync exit 23/24 after connecting), the stderr tail as a warning.
   */
  error: string | null;
  duration_ms: number;
}

export const RSYNC_PROGRAM = 'rsync';
export const SSH_PROGRAM = 'ssh';

/** rsync filter rules selecting exactly the evidence files (matched against the project directory's root). */
export const EVIDENCE_FILTERS: readonly string[] = [
  '--include=/run_notes.md',
  '--include=/.research/',
  '--include=/.research/decision.json',
  '--include=/results/',
  '--include=/results/**',
  '--exclude=*',
];

const STDERR_TAIL_CHARS = 500;
/** The descriptor rsync finds the pinned destination parent on. */
const PINNED_FD = 3;
/** After timeout_ms the process group gets SIGTERM, and SIGKILL this long after if it is still there. */
const KILL_GRACE_MS = 500;

// rsync exit codes: 23 partial transfer due to error, 24 some source files vanished. Both mean it connected.
const PARTIAL_TRANSFER = new Set([23, 24]);

interface SshTarget {
  user: string | undefined;
  host: string;
  port: number | undefined;
}

const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
const USER = /^[A-Za-z0-9._][A-Za-z0-9._-]*$/;
// A DNS name, an IPv4 address, or an ssh-config alias; never starting with '-' (ssh would read an option).
const HOST = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const IPV6 = /^[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?$/;

function parsePort(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text)) return undefined;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : undefined;
}

/** Parses ssh_host; a string naming an error when it is not one of the accepted forms. */
export function parseSshHost(text: string): SshTarget | string {
  let rest = text.trim();
  if (rest === '' || CONTROL_CHARS.test(rest) || /\s/.test(rest)) return 'ssh_host is empty or holds whitespace';
  if (rest.startsWith('ssh://')) rest = rest.slice('ssh://'.length).replace(/\/$/, '');
  let user: string | undefined;
  const at = rest.lastIndexOf('@');
  if (at >= 0) {
    user = rest.slice(0, at);
    rest = rest.slice(at + 1);
    // Not echoed: a 'user:password@' here would otherwise land in logs.
    if (!USER.test(user)) return 'ssh_host has an unusable user name (letters, digits, ".", "_" and "-" only)';
  }
  let host = rest;
  let port: number | undefined;
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(rest);
  if (bracketed) {
    host = bracketed[1] ?? '';
    if (!IPV6.test(host)) return `ssh_host has an unusable address: ${JSON.stringify(host)}`;
    if (bracketed[2] !== undefined) {
      port = parsePort(bracketed[2]);
      if (port === undefined) return `ssh_host has an unusable port: ${JSON.stringify(bracketed[2])}`;
    }
    return { user, host, port };
  }
  const colons = rest.split(':').length - 1;
  if (colons === 1) {
    const [name, portText] = rest.split(':') as [string, string];
    host = name;
    port = parsePort(portText);
    if (port === undefined) return `ssh_host has an unusable port: ${JSON.stringify(portText)}`;
  } else if (colons > 1) {
    if (!IPV6.test(rest)) return `ssh_host has an unusable address: ${JSON.stringify(rest)}`;
    return { user, host: rest, port: undefined };
  }
  if (!HOST.test(host)) return `ssh_host has an unusable host name: ${JSON.stringify(host)}`;
  return { user, host, port };
}

const describeTarget = (target: SshTarget) => {
  const host = target.host.includes(':') ? `[${target.host}]` : target.host;
  return `${target.user ? `${target.user}@` : ''}${host}${target.port ? `:${target.port}` : ''}`;
};

/** A project_dir is relative, has no '.' or '..' segments and no control characters. */
function projectDirProblem(projectDir: string): string | undefined {
  if (projectDir.trim() === '') return 'project_dir is empty';
  if (CONTROL_CHARS.test(projectDir)) return 'project_dir holds control characters';
  if (isAbsolute(projectDir) || projectDir.startsWith('/') || projectDir.startsWith('\\')) return 'project_dir must be relative';
  const segments = projectDir.split(/[/\\]+/).filter((segment) => segment !== '');
  if (segments.some((segment) => segment === '..')) return "project_dir must not hold '..' segments";
  if (segments.every((segment) => segment === '.')) return 'project_dir names project_root itself';
  return undefined;
}

const lexists = (path: string) => {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
};

const realRoot = (projectRoot: string) => {
  try {
    return realpathSync(resolve(projectRoot));
  } catch {
    return resolve(projectRoot);
  }
};

/** Shows an argument as a POSIX shell would need it (for the operator's eyes; nothing runs it through a shell). */
const shellQuote = (arg: string) => (/^[A-Za-z0-9_./:=@%+,-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`);

/**
 * One argument of rsync's `-e` string. rsync splits that string on spaces, honouring single quotes; ssh reads
 * UserKnownHostsFile as a space-separated list with %-tokens, hence the double quotes and '%%' inside.
 */
function knownHostsOption(file: string): string | undefined {
  if (CONTROL_CHARS.test(file) || /['"\\]/.test(file)) return undefined;
  const value = file.replace(/%/g, '%%');
  return /\s/.test(value) ? `'UserKnownHostsFile="${value}"'` : `UserKnownHostsFile=${value}`;
}

/**
 * Evidence files under `dir` (regular files only; links are not followed), relative and sorted, with their bytes in
 * all; `over` when they pass EVIDENCE_CAPS (the walk stops at the cap on entries, whatever the tree holds).
 */
async function listEvidence(dir: string): Promise<{ files: string[]; over: boolean }> {
  const found: string[] = [];
  let bytes = 0;
  let entriesLeft = EVIDENCE_CAPS.maxEntriesVisited;
  const fileSize = async (path: string) => {
    const info = await lstat(path).catch(() => undefined);
    return info?.isFile() ? info.size : null;
  };
  const take = async (rel: string) => {
    const size = await fileSize(join(dir, rel));
    if (size === null) return;
    found.push(rel);
    bytes += size;
  };
  for (const file of ['run_notes.md', '.research/decision.json']) await take(file);
  const walk = async (relDir: string): Promise<void> => {
    const entries = await readdir(join(dir, relDir), { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      if (--entriesLeft < 0) return;
      const rel = `${relDir}/${entry.name}`;
      if (entry.isDirectory()) await walk(rel);
      else if (entry.isFile()) await take(rel);
    }
  };
  if ((await lstat(join(dir, 'results')).catch(() => undefined))?.isDirectory()) await walk('results');
  const over = entriesLeft < 0 || found.length > EVIDENCE_CAPS.maxFiles || bytes > EVIDENCE_CAPS.maxTotalBytes;
  return { files: found.sort(), over };
}

interface Outcome {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** Stopped by onStdoutLine. */
  stopped: boolean;
  stderr: string;
  spawnError: string | null;
}

interface RunOptions {
  /** Handed to the child as its descriptor 3 (the pinned destination parent). */
  pinnedFd?: number;
  /** Each line of stdout; answering false stops the command (its whole group is killed). */
  onStdoutLine?: (line: string) => boolean;
}

/** The longest stdout line kept while waiting for its end: rsync's list lines are a path plus ~50 bytes. */
const MAX_STDOUT_LINE = 16 * 1024;

/** Runs `program` in its own process group; after timeoutMs the whole group is killed. */
function runBounded(program: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number, options: RunOptions = {}): Promise<Outcome> {
  return new Promise((resolveOutcome) => {
    let stderr = '';
    let timedOut = false;
    let stopped = false;
    let spawnError: string | null = null;
    let signal: NodeJS.Signals | null = null;
    let settled = false;
    const stdio: ('ignore' | 'pipe' | number)[] = ['ignore', options.onStdoutLine ? 'pipe' : 'ignore', 'pipe'];
    if (options.pinnedFd !== undefined) stdio.push(options.pinnedFd);
    const child = spawn(program, args, { env, detached: true, stdio });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4 * STDERR_TAIL_CHARS)));
    const signalGroup = (signal: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // The group is gone already.
      }
    };
    const timers: NodeJS.Timeout[] = [];
    const onLine = options.onStdoutLine;
    if (onLine && child.stdout) {
      let pending = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        if (stopped) return;
        const lines = (pending + chunk).split('\n');
        pending = lines.pop() ?? '';
        if (pending.length > MAX_STDOUT_LINE || !lines.every((line) => onLine(line))) {
          stopped = true;
          // SIGTERM first: rsync then removes the temporary file of the transfer it was in.
          signalGroup('SIGTERM');
          timers.push(setTimeout(() => signalGroup('SIGKILL'), KILL_GRACE_MS));
        }
      });
    }
    const finish = (exitCode: number | null) => {
      if (settled) return;
      settled = true;
      timers.forEach(clearTimeout);
      // After a timeout or a stop, nothing rsync started in its group (an ssh still closing) outlives the sync.
      if (timedOut || stopped) signalGroup('SIGKILL');
      resolveOutcome({ exitCode, signal, timedOut, stopped, stderr, spawnError });
    };
    timers.push(
      setTimeout(() => {
        timedOut = true;
        signalGroup('SIGTERM');
        timers.push(setTimeout(() => signalGroup('SIGKILL'), KILL_GRACE_MS));
        // Should the pipes never close (a grandchild that left the group holding them), stop waiting anyway.
        timers.push(setTimeout(() => finish(null), KILL_GRACE_MS + 1000));
      }, Math.min(Math.max(1, timeoutMs), 2_147_483_647)),
    );
    child.once('error', (error) => {
      spawnError = `${program} could not be started: ${error.message}`;
      finish(null);
    });
    child.once('close', (code, closedBy) => {
      signal = closedBy;
      finish(timedOut ? null : code);
    });
  });
}

// One line of `rsync --list-only --no-human-readable`: mode, size, date, time, name (non-printables escaped as \#ooo).
const LIST_LINE = /^([-dlpscb])[-rwxsStT]{9}\S*\s+(\d+)\s+\d{4}\/\d{2}\/\d{2}\s+\d{2}:\d{2}:\d{2}\s(.+)$/;
// One line of the copy's `--out-format='%i %l %n'` with `-ii` (unchanged files too): the item's change summary (its
// second character its kind, 'f' for a file), its size, its name.
const ITEMIZED_LINE = /^[.<>ch*][fdLDS]\S*\s+(\d+)\s/;
const COPY_OUT_FORMAT = '%i %l %n';

interface EvidenceCount {
  files: number;
  bytes: number;
  /** Why the evidence is over EVIDENCE_CAPS; null while it is within them. */
  over: string | null;
}

/**
 * Counts evidence against EVIDENCE_CAPS from rsync's output, one line at a time, as `parse` reads each line (null for
 * a line that names no entry). The line handler answers false once a cap is passed, which stops the command: a tree of
 * a million files costs no more than the cap, while listing as while copying.
 */
function capCounter(parse: (line: string) => { isFile: boolean; size: number } | null): { onLine: (line: string) => boolean; count: EvidenceCount } {
  const count: EvidenceCount = { files: 0, bytes: 0, over: null };
  let entries = 0;
  const onLine = (line: string) => {
    const entry = parse(line);
    if (!entry) return true;
    if (++entries > EVIDENCE_CAPS.maxEntriesVisited) count.over = `more than ${EVIDENCE_CAPS.maxEntriesVisited} entries`;
    else if (entry.isFile) {
      count.files += 1;
      count.bytes += entry.size;
      if (entry.size > EVIDENCE_CAPS.maxFileBytes) count.over = `a file of ${entry.size} bytes (at most ${EVIDENCE_CAPS.maxFileBytes})`;
      else if (count.files > EVIDENCE_CAPS.maxFiles) count.over = `more than ${EVIDENCE_CAPS.maxFiles} files`;
      else if (count.bytes > EVIDENCE_CAPS.maxTotalBytes) count.over = `more than ${EVIDENCE_CAPS.maxTotalBytes} bytes`;
    }
    return count.over === null;
  };
  return { onLine, count };
}

const listedEntry = (line: string) => {
  const parsed = LIST_LINE.exec(line);
  return parsed ? { isFile: parsed[1] === '-', size: Number(parsed[2]) } : null;
};

const copiedEntry = (line: string) => {
  const parsed = ITEMIZED_LINE.exec(line);
  return parsed ? { isFile: line[1] === 'f', size: Number(parsed[1]) } : null;
};

const tail = (text: string) => {
  const trimmed = text.trim();
  return trimmed.length > STDERR_TAIL_CHARS ? `…${trimmed.slice(-STDERR_TAIL_CHARS)}` : trimmed;
};

/** Copies the evidence of `<remote_root>/<project_dir>` on ssh_host into `<project_root>/<project_dir>`. */
export async function syncEvidence(
  settings: EvidenceSyncSettings,
  target: { project_root: string; project_dir: string },
): Promise<EvidenceSyncReport> {
  const started = performance.now();
  const root = realRoot(target.project_root);
  const destination = resolve(root, target.project_dir);
  const parsed = parseSshHost(settings.ssh_host);
  const remoteDir = posix.join(settings.remote_root, target.project_dir);
  const shownHost = typeof parsed === 'string' ? settings.ssh_host.trim().replace(/^(ssh:\/\/)?[^@]*@/, '$1…@') : describeTarget(parsed);
  const source = `${shownHost}:${remoteDir}`;
  const report = (fields: Partial<EvidenceSyncReport> & { ok: boolean }): EvidenceSyncReport => ({
    source,
    destination,
    command: '',
    exit_code: null,
    timed_out: false,
    copied: [],
    over_cap: false,
    error: null,
    duration_ms: Math.round(performance.now() - started),
    ...fields,
  });
  const refuse = (error: string) => report({ ok: false, error });

  if (typeof parsed === 'string') return refuse(parsed);
  const dirProblem = projectDirProblem(target.project_dir);
  if (dirProblem) return refuse(dirProblem);
  if (!isStrictlyInside(root, destination)) return refuse(`project_dir escapes project_root (${root})`);
  if (!reachableInside(root, destination)) return refuse('project_dir escapes project_root through a symbolic link');
  if (!posix.isAbsolute(settings.remote_root) || CONTROL_CHARS.test(settings.remote_root)) {
    return refuse('remote_root must be an absolute path without control characters');
  }
  if (!Number.isFinite(settings.timeout_ms) || settings.timeout_ms <= 0) return refuse('timeout_ms must be a positive number');

  const connectTimeoutS = Math.min(30, Math.max(1, Math.ceil(settings.timeout_ms / 1000)));
  const sshArgs = [
    SSH_PROGRAM,
    '-o', 'BatchMode=yes',
    '-o', `ConnectTimeout=${connectTimeoutS}`,
    '-o', 'StrictHostKeyChecking=accept-new',
    '-o', 'LogLevel=ERROR',
  ];
  if (settings.known_hosts_file) {
    const option = knownHostsOption(resolve(settings.known_hosts_file));
    if (!option) return refuse('known_hosts_file must not hold quotes, backslashes or control characters');
    try {
      await mkdir(dirname(resolve(settings.known_hosts_file)), { recursive: true, mode: 0o700 });
    } catch (error) {
      return refuse(`cannot create the directory of known_hosts_file: ${(error as Error).message}`);
    }
    sshArgs.push('-o', option);
  }
  if (parsed.port) sshArgs.push('-p', String(parsed.port));
  if (parsed.user) sshArgs.push('-l', parsed.user);

  const remoteHost = parsed.host.includes(':') ? `[${parsed.host}]` : parsed.host;
  const remoteSource = `${remoteHost}:${remoteDir.endsWith('/') ? remoteDir : `${remoteDir}/`}`;
  const selection = [
    '-a',
    '--prune-empty-dirs',
    // Paths travel inside rsync's protocol, not through the remote shell (no word splitting, no globbing there).
    '--protect-args',
    // Evidence is plain files: no links (one could point the paper at a file of the control plane's), no devices.
    '--no-links',
    '--no-devices',
    '--no-specials',
    ...EVIDENCE_FILTERS,
    '-e', sshArgs.join(' '),
  ];
  const listArgs = [...selection, '--list-only', '--no-human-readable', remoteSource];
  const args = [
    ...selection,
    // Compare contents, not size and mtime: an agent that rewrites a results file within the second of the last sync,
    // at the same size, would otherwise keep its old copy here.
    '--checksum',
    // No ownership taken from the worker, ordinary modes.
    '--no-owner',
    '--no-group',
    '--chmod=Du=rwx,Dgo=rx,Fu=rw,Fgo=r',
    // The evidence reader's caps (worker-gate/contract/evidence-caps.ts): a file that grew past its cap since the listing is not copied.
    `--max-size=${EVIDENCE_CAPS.maxFileBytes}`,
    // Every entry, copied or already here, is reported as it goes, so the copy is counted and stopped at the caps.
    '-ii',
    `--out-format=${COPY_OUT_FORMAT}`,
    remoteSource,
    // The destination's parent is pinned (opened, its real path checked inside project_root) and handed to rsync as
    // its descriptor 3: a link swapped into the path after the checks cannot carry the copy elsewhere.
    `/proc/self/fd/${PINNED_FD}/${basename(destination)}/`,
  ];
  const shown = (programArgs: string[]) => [RSYNC_PROGRAM, ...programArgs].map(shellQuote).join(' ');
  const env = { ...process.env, ...settings.env };
  const deadline = performance.now() + settings.timeout_ms;
  const timeLeft = () => Math.max(1, deadline - performance.now());
  const judge = (outcome: Outcome) => judgeOutcome(outcome, settings.timeout_ms, `${remoteDir} does not exist on ${describeTarget(parsed)}`, describeTarget(parsed));

  // The remote evidence is counted first: over its caps, nothing is copied and it counts as missing.
  const listingCount = capCounter(listedEntry);
  const listed = await runBounded(RSYNC_PROGRAM, listArgs, env, timeLeft(), { onStdoutLine: listingCount.onLine });
  if (listingCount.count.over !== null) {
    return report({
      ok: false,
      over_cap: true,
      command: shown(listArgs),
      error: `the evidence on the worker is over its cap (${listingCount.count.over}): nothing was copied and it counts as missing`,
    });
  }
  const listing = judge(listed);
  if (!listing.ok) return report({ ok: false, command: shown(listArgs), exit_code: listed.exitCode, timed_out: listed.timedOut, error: listing.error });

  // rsync creates the project directory itself but not its parents; created ones are removed again on failure.
  let firstCreated: string | undefined;
  try {
    firstCreated = await mkdir(dirname(destination), { recursive: true });
  } catch (error) {
    return refuse(`cannot create ${dirname(destination)}: ${(error as Error).message}`);
  }
  let parent: PinnedDir;
  try {
    parent = PinnedDir.open(root, relative(root, dirname(destination)), { allowBase: true });
  } catch {
    return refuse('project_dir escapes project_root through a symbolic link');
  }
  const destinationExisted = lexists(destination);
  const undoCreated = async () => {
    // rmdir removes only empty directories: anything rsync did write stays.
    if (!destinationExisted) await rmdir(destination).catch(() => undefined);
    if (!firstCreated) return;
    for (let dir = dirname(destination); isStrictlyInside(dirname(firstCreated), dir); dir = dirname(dir)) {
      if (!(await rmdir(dir).then(() => true, () => false))) break;
    }
  };

  // What grows on the worker between the listing and the copy is counted as it is copied, from the sizes in rsync's
  // file list: the copy stops at the caps. A file that grows while it is being sent is caught by the count after.
  const copyCount = capCounter(copiedEntry);
  const outcome = await runBounded(RSYNC_PROGRAM, args, env, timeLeft(), { pinnedFd: parent.fd, onStdoutLine: copyCount.onLine }).finally(() => parent.close());
  const copyOver = copyCount.count.over;
  let { ok, error } = copyOver === null ? judge(outcome) : { ok: false, error: `the evidence on the worker grew over its cap during the copy (${copyOver}): the copy was stopped and it counts as missing` };
  if (!ok) await undoCreated();
  // An older copy's files here count too.
  const copied = await listEvidence(destination);
  const overCap = copyOver !== null || (ok && copied.over);
  if (ok && overCap) {
    ok = false;
    error = `the evidence is over its cap (${EVIDENCE_CAPS.maxFiles} files, ${EVIDENCE_CAPS.maxTotalBytes} bytes, ${EVIDENCE_CAPS.maxFileBytes} bytes a file): it counts as missing`;
  }
  return report({ ok, over_cap: overCap, command: shown(args), exit_code: outcome.exitCode, timed_out: outcome.timedOut, copied: copied.files, error });
}

/** Whether a finished rsync counts as a sync, and if not, why (a reason, or the tail of rsync's and ssh's stderr). */
function judgeOutcome(outcome: Outcome, timeoutMs: number, missingDirMessage: string, target: string): { ok: boolean; error: string | null } {
  const stderrTail = tail(outcome.stderr);
  if (outcome.spawnError) return { ok: false, error: outcome.spawnError };
  if (outcome.timedOut) return { ok: false, error: `timed out after ${timeoutMs} ms${stderrTail ? `: ${stderrTail}` : ''}` };
  if (outcome.exitCode === 0) return { ok: true, error: null };
  if (outcome.exitCode !== null && PARTIAL_TRANSFER.has(outcome.exitCode)) {
    // Connected, but something could not be read. A missing project directory is a misconfiguration, not a
    // project without results: rsync says `change_dir "<dir>" failed` for it.
    const missingDir = /change_dir .* failed: No such file or directory/.test(outcome.stderr);
    return missingDir ? { ok: false, error: `remote project directory ${missingDirMessage}` } : { ok: true, error: stderrTail || null };
  }
  const error = stderrTail || (outcome.signal ? `rsync was killed by ${outcome.signal}` : `rsync exited with code ${outcome.exitCode}`);
  if (outcome.exitCode === 255 || outcome.exitCode === 12 || outcome.exitCode === 5) {
    return { ok: false, error: `could not connect to ${target} over ssh (rsync exit ${outcome.exitCode}): ${error}` };
  }
  return { ok: false, error };
}
