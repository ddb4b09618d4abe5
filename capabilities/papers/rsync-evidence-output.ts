import { EVIDENCE_CAPS } from '../../worker-gate/contract/evidence-caps.ts';
import { stderrTail, type CommandOutcome } from './bounded-command.ts';

/**
 * What rsync says during an evidence sync, read: its listing and its copy counted line by line against
 * EVIDENCE_CAPS, and a finished rsync judged a sync or not (from its exit code and its stderr).
 */

// rsync exit codes: 23 partial transfer due to error, 24 some source files vanished. Both mean it connected.
const PARTIAL_TRANSFER = new Set([23, 24]);

// One line of `rsync --list-only --no-human-readable`: mode, size, date, time, name (non-printables escaped as \#ooo).
const LIST_LINE = /^([-dlpscb])[-rwxsStT]{9}\S*\s+(\d+)\s+\d{4}\/\d{2}\/\d{2}\s+\d{2}:\d{2}:\d{2}\s(.+)$/;
// One line of the copy's `--out-format='%i %l %n'` with `-ii` (unchanged files too): the item's change summary (its
// second character its kind, 'f' for a file), its size, its name.
const ITEMIZED_LINE = /^[.<>ch*][fdLDS]\S*\s+(\d+)\s/;
export const COPY_OUT_FORMAT = '%i %l %n';

export interface EvidenceCount {
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
export function capCounter(parse: (line: string) => { isFile: boolean; size: number } | null): { onLine: (line: string) => boolean; count: EvidenceCount } {
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

/** An entry of the listing (`--list-only`). */
export const listedEntry = (line: string) => {
  const parsed = LIST_LINE.exec(line);
  return parsed ? { isFile: parsed[1] === '-', size: Number(parsed[2]) } : null;
};

/** An entry of the copy (`-ii` with COPY_OUT_FORMAT). */
export const copiedEntry = (line: string) => {
  const parsed = ITEMIZED_LINE.exec(line);
  return parsed ? { isFile: line[1] === 'f', size: Number(parsed[1]) } : null;
};

/** Whether a finished rsync counts as a sync, and if not, why (a reason, or the tail of rsync's and ssh's stderr). */
export function judgeOutcome(outcome: CommandOutcome, timeoutMs: number, missingDirMessage: string, target: string): { ok: boolean; error: string | null } {
  const stderrText = stderrTail(outcome.stderr);
  if (outcome.spawnError) return { ok: false, error: outcome.spawnError };
  if (outcome.timedOut) return { ok: false, error: `timed out after ${timeoutMs} ms${stderrText ? `: ${stderrText}` : ''}` };
  if (outcome.exitCode === 0) return { ok: true, error: null };
  if (outcome.exitCode !== null && PARTIAL_TRANSFER.has(outcome.exitCode)) {
    // Connected, but something could not be read. A missing project directory is a misconfiguration, not a
    // project without results: rsync says `change_dir "<dir>" failed` for it.
    const missingDir = /change_dir .* failed: No such file or directory/.test(outcome.stderr);
    return missingDir ? { ok: false, error: `remote project directory ${missingDirMessage}` } : { ok: true, error: stderrText || null };
  }
  const error = stderrText || (outcome.signal ? `rsync was killed by ${outcome.signal}` : `rsync exited with code ${outcome.exitCode}`);
  if (outcome.exitCode === 255 || outcome.exitCode === 12 || outcome.exitCode === 5) {
    return { ok: false, error: `could not connect to ${target} over ssh (rsync exit ${outcome.exitCode}): ${error}` };
  }
  return { ok: false, error };
}
