import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/**
 * Why a dev server start failed, read from this attempt's part of its log: the cause line, the log's tail, and the
 * port it names as already in use (a start that lost a port race is tried again).
 */

const LOG_TAIL_LINES = 20;

/** A start that failed; takenPort when its log says that port was already in use when the server bound it. */
export class DevServerStartError extends Error {
  readonly takenPort: number | undefined;

  constructor(message: string, takenPort: number | undefined) {
    super(message);
    this.name = 'DevServerStartError';
    this.takenPort = takenPort;
  }
}

/** The line that says why a start failed: a Go panic's first line, or the CLI's error line. */
const CAUSE_LINE = /^(?:panic: .*|.*\blevel=ERROR\b.*)$/m;
const TAKEN_PORT = /listen tcp \S*:(\d+): bind: address already in use/i;

/**
 * The error names the cause from this attempt's part of the log (a panic's cause is at its top, above a stack trace
 * longer than the tail) and quotes the log's last lines.
 */
export function startupError(message: string, logFile: string, attemptLogStart: number): DevServerStartError {
  let attemptLog: string;
  try {
    attemptLog = readAttemptLog(logFile, attemptLogStart);
  } catch (err) {
    attemptLog = `(could not read log: ${err instanceof Error ? err.message : String(err)})`;
  }
  const cause = CAUSE_LINE.exec(attemptLog)?.[0];
  const tail = attemptLog.split('\n').filter((l) => l.trim() !== '').slice(-LOG_TAIL_LINES).join('\n');
  return new DevServerStartError(
    `${message}${cause === undefined ? '' : `: ${cause}`}\n--- last ${LOG_TAIL_LINES} lines of ${logFile} ---\n${tail}`,
    takenPortIn(attemptLog),
  );
}

/** The log is appended to by every start: only this attempt's part is read, and at most ATTEMPT_LOG_MAX_BYTES of it. */
const ATTEMPT_LOG_MAX_BYTES = 4 * 1024 * 1024;

function readAttemptLog(logFile: string, attemptLogStart: number): string {
  const fd = openSync(logFile, 'r');
  try {
    const length = Math.max(0, Math.min(fstatSync(fd).size - attemptLogStart, ATTEMPT_LOG_MAX_BYTES));
    const buffer = Buffer.alloc(length);
    const read = readSync(fd, buffer, 0, length, attemptLogStart);
    return buffer.subarray(0, read).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

function takenPortIn(attemptLog: string): number | undefined {
  const port = TAKEN_PORT.exec(attemptLog)?.[1];
  return port === undefined ? undefined : Number(port);
}
