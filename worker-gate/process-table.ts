import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { parseProcPidStat, type ProcPidStat } from './telemetry/proc-parsers.ts';

export interface ProcessInfo {
  pid: number;
  ppid: number;
  pgrp: number;
  comm: string;
  /** One letter from /proc/<pid>/stat; 'Z' is a zombie (exited, not yet reaped). */
  state: string;
  startTicks: number;
  /** utime + stime in clock ticks; absent where the table was built by hand. */
  cpuTicks?: number;
  /** null when unreadable (another user's process, kernel thread, gone) or not asked for. */
  cwd: string | null;
}

export interface ReadProcessTableOptions {
  procRoot?: string;
  withCwd?: boolean;
}

/** A process can exit or be out of reach at any point of a scan; these codes mean exactly that. */
const VANISHED_OR_FORBIDDEN = new Set(['ENOENT', 'ESRCH', 'EACCES', 'EPERM', 'ENOTDIR', 'EINVAL']);

const DEFAULT_CLOCK_TICKS = 100;
let cachedClockTicks: number | null = null;

/** One snapshot of all processes: one readdir, then per pid one stat read and (withCwd) one cwd readlink. */
export function readProcessTable(options: ReadProcessTableOptions = {}): ProcessInfo[] {
  const procRoot = options.procRoot ?? '/proc';
  const withCwd = options.withCwd ?? true;
  const table: ProcessInfo[] = [];
  for (const name of readdirSync(procRoot)) {
    if (!/^\d+$/.test(name)) continue;
    const info = readProcess(procRoot, name, withCwd);
    if (info) table.push(info);
  }
  return table;
}

function readProcess(procRoot: string, name: string, withCwd: boolean): ProcessInfo | null {
  const statText = readTolerant(() => readFileSync(join(procRoot, name, 'stat'), 'utf8'));
  const stat = statText === null ? null : parseProcPidStat(statText);
  if (!stat) return null;
  const cwd = withCwd ? readProcessCwd(stat.pid, procRoot) : null;
  return { pid: stat.pid, ppid: stat.ppid, pgrp: stat.pgrp, comm: stat.comm, state: stat.state, startTicks: stat.startTicks, cpuTicks: stat.cpuTicks, cwd };
}

/** argv of a process (NUL-separated /proc/<pid>/cmdline); [] for kernel threads and zombies, null if unreadable. */
export function readCmdline(pid: number, procRoot = '/proc'): string[] | null {
  const text = readTolerant(() => readFileSync(join(procRoot, String(pid), 'cmdline'), 'utf8'));
  if (text === null) return null;
  const args = text.split('\0');
  if (args.at(-1) === '') args.pop();
  return args;
}

/** Re-reads one process's stat, e.g. to check that a pid still names the same process before signalling it. */
export function readProcessStat(pid: number, procRoot = '/proc'): ProcPidStat | null {
  const text = readTolerant(() => readFileSync(join(procRoot, String(pid), 'stat'), 'utf8'));
  return text === null ? null : parseProcPidStat(text);
}

/** The working directory of one process, or null when it is gone or out of reach. */
export function readProcessCwd(pid: number, procRoot = '/proc'): string | null {
  return readTolerant(() => readlinkSync(join(procRoot, String(pid), 'cwd')));
}

/** USER_HZ, the unit of /proc start times; asked of getconf once, 100 (the Linux value everywhere) if that fails. */
export function clockTicksPerSecond(): number {
  if (cachedClockTicks !== null) return cachedClockTicks;
  cachedClockTicks = DEFAULT_CLOCK_TICKS;
  try {
    const value = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 2_000 }).trim());
    if (Number.isInteger(value) && value > 0) cachedClockTicks = value;
  } catch {
    // keep the default
  }
  return cachedClockTicks;
}

export function processStartedAtMs(startTicks: number, btimeSec: number, ticksPerSec: number): number {
  return btimeSec * 1000 + (startTicks * 1000) / ticksPerSec;
}

function readTolerant<T>(read: () => T): T | null {
  try {
    return read();
  } catch (error) {
    if (isVanishedOrForbidden(error)) return null;
    throw error;
  }
}

function isVanishedOrForbidden(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return typeof code === 'string' && VANISHED_OR_FORBIDDEN.has(code);
}
