import { lstatSync, realpathSync } from 'node:fs';
import { lstat, mkdir, readdir, rmdir } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, posix, relative, resolve } from 'node:path';
import { EVIDENCE_CAPS } from '../../worker-gate/contract/evidence-caps.ts';
import { isStrictlyInside, PinnedDir, reachableInside } from '../../platform/files/pinned-dir.ts';
import { runBounded, type CommandOutcome } from './bounded-command.ts';
import { CONTROL_CHARS, describeTarget, knownHostsOption, parseSshHost } from './evidence-ssh-host.ts';
import { capCounter, COPY_OUT_FORMAT, copiedEntry, judgeOutcome, listedEntry } from './rsync-evidence-output.ts';

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

/** The descriptor rsync finds the pinned destination parent on. */
const PINNED_FD = 3;

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
  const judge = (outcome: CommandOutcome) => judgeOutcome(outcome, settings.timeout_ms, `${remoteDir} does not exist on ${describeTarget(parsed)}`, describeTarget(parsed));

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
