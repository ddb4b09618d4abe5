/** Pure parsers for /proc files and nvidia-smi CSV output. No I/O here, so fixtures can drive every case. */

export interface CpuCounters {
  /** Sum of user..steal jiffies. */
  total: number;
  /** idle + iowait jiffies. */
  idle: number;
}

export interface ProcStat {
  cpu: CpuCounters;
  /** Boot time in epoch seconds; null when the `btime` line is missing. */
  btimeSec: number | null;
}

export interface MemoryFigures {
  memory_available_mib: number;
  memory_source: string;
}

export interface ProcPidStat {
  pid: number;
  comm: string;
  /** One letter: R, S, D, Z, T, ... */
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  /** Field 22 (starttime): clock ticks after boot. Together with the pid it names one process. */
  startTicks: number;
  /** Fields 14 and 15 (utime + stime): CPU time the process has used, in clock ticks. */
  cpuTicks: number;
}

export interface NvidiaSmiGpu {
  index: number;
  utilization_pct: number | null;
  memory_used_mib: number | null;
  memory_total_mib: number | null;
  /** null where the row carries no uuid column (an older query). */
  uuid: string | null;
}

export interface NvidiaSmiComputeApp {
  pid: number;
  used_memory_mib: number | null;
  /** The GPU the process runs on; null where the row carries no gpu_uuid column. */
  gpu_uuid: string | null;
}

/** user nice system idle iowait irq softirq steal; guest and guest_nice are already counted in user and nice. */
const CPU_TIME_FIELDS = 8;
const IDLE_FIELD = 3;
const IOWAIT_FIELD = 4;

export function parseProcStat(text: string): ProcStat | null {
  let cpu: CpuCounters | null = null;
  let btimeSec: number | null = null;
  for (const line of text.split('\n')) {
    if (line.startsWith('cpu ')) cpu = parseAggregateCpuLine(line);
    else if (line.startsWith('btime ')) btimeSec = parseNonNegativeInt(line.slice('btime '.length).trim());
  }
  return cpu ? { cpu, btimeSec } : null;
}

function parseAggregateCpuLine(line: string): CpuCounters | null {
  const fields = line.trim().split(/\s+/).slice(1, 1 + CPU_TIME_FIELDS).map(parseNonNegativeInt);
  // Kernels before 2.6 report only four fields; anything shorter than that is not a cpu line.
  if (fields.length <= IDLE_FIELD || fields.some((value) => value === null)) return null;
  const values = fields as number[];
  const total = values.reduce((sum, value) => sum + value, 0);
  const idle = values[IDLE_FIELD]! + (values[IOWAIT_FIELD] ?? 0);
  return { total, idle };
}

/** Busy share of all CPU time between two readings, 0–100 rounded to 0.1; null when no time has passed. */
export function cpuPercentBetween(prev: CpuCounters, next: CpuCounters): number | null {
  const totalDelta = next.total - prev.total;
  if (totalDelta <= 0) return null;
  const busyDelta = totalDelta - (next.idle - prev.idle);
  const pct = (busyDelta / totalDelta) * 100;
  return Math.round(Math.min(100, Math.max(0, pct)) * 10) / 10;
}

/** MemAvailable + SwapFree in MiB, falling back to MemFree + Buffers + Cached on kernels without MemAvailable. */
export function parseMeminfo(text: string): MemoryFigures | null {
  const kb = parseMeminfoFields(text);
  const available = kb.get('MemAvailable');
  const used: string[] = [];
  let totalKb = 0;
  const add = (name: string): void => {
    const value = kb.get(name);
    if (value === undefined) return;
    used.push(name);
    totalKb += value;
  };
  if (available !== undefined) {
    add('MemAvailable');
  } else {
    if (!kb.has('MemFree')) return null;
    add('MemFree');
    add('Buffers');
    add('Cached');
  }
  add('SwapFree');
  return { memory_available_mib: Math.floor(totalKb / 1024), memory_source: used.join('+') };
}

function parseMeminfoFields(text: string): Map<string, number> {
  const fields = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z0-9_()]+):\s+(\d+)(?:\s+kB)?\s*$/.exec(line);
    if (match) fields.set(match[1]!, Number(match[2]));
  }
  return fields;
}

/** Index into the fields after `comm`: field N of proc(5) is at N - 3. */
const STAT_STATE = 0;
const STAT_PPID = 1;
const STAT_PGRP = 2;
const STAT_SESSION = 3;
const STAT_UTIME = 11;
const STAT_STIME = 12;
const STAT_STARTTIME = 19;

export function parseProcPidStat(text: string): ProcPidStat | null {
  const open = text.indexOf('(');
  // comm may itself contain ') ', so the last ')' is the one that closes it.
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return null;
  const pid = parseNonNegativeInt(text.slice(0, open).trim());
  const rest = text.slice(close + 1).trim().split(/\s+/);
  const state = rest[STAT_STATE];
  const ppid = parseNonNegativeInt(rest[STAT_PPID]);
  const pgrp = parseNonNegativeInt(rest[STAT_PGRP]);
  const session = parseNonNegativeInt(rest[STAT_SESSION]);
  const startTicks = parseNonNegativeInt(rest[STAT_STARTTIME]);
  const utime = parseNonNegativeInt(rest[STAT_UTIME]);
  const stime = parseNonNegativeInt(rest[STAT_STIME]);
  if (pid === null || !state || ppid === null || pgrp === null || session === null || startTicks === null) return null;
  return { pid, comm: text.slice(open + 1, close), state, ppid, pgrp, session, startTicks, cpuTicks: (utime ?? 0) + (stime ?? 0) };
}

/** Rows of `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total[,uuid] --format=csv,noheader,nounits`. */
export function parseNvidiaSmiGpus(csv: string): NvidiaSmiGpu[] {
  const gpus: NvidiaSmiGpu[] = [];
  for (const cells of csvRows(csv)) {
    if (cells.length !== 4 && cells.length !== 5) continue;
    const index = parseNonNegativeInt(cells[0]);
    const utilization = parseMeasurement(cells[1]!);
    const memoryUsed = parseMeasurement(cells[2]!);
    const memoryTotal = parseMeasurement(cells[3]!);
    if (index === null || utilization === undefined || memoryUsed === undefined || memoryTotal === undefined) continue;
    gpus.push({ index, utilization_pct: utilization, memory_used_mib: memoryUsed, memory_total_mib: memoryTotal, uuid: cells[4] || null });
  }
  return gpus;
}

/** Rows of `nvidia-smi --query-compute-apps=pid,used_memory[,gpu_uuid] --format=csv,noheader,nounits`. */
export function parseNvidiaSmiComputeApps(csv: string): NvidiaSmiComputeApp[] {
  const apps: NvidiaSmiComputeApp[] = [];
  for (const cells of csvRows(csv)) {
    if (cells.length !== 2 && cells.length !== 3) continue;
    const pid = parseNonNegativeInt(cells[0]);
    const usedMemory = parseMeasurement(cells[1]!);
    if (pid === null || pid === 0 || usedMemory === undefined) continue;
    apps.push({ pid, used_memory_mib: usedMemory, gpu_uuid: cells[2] || null });
  }
  return apps;
}

function csvRows(csv: string): string[][] {
  return csv
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .map((line) => line.split(',').map((cell) => cell.trim()));
}

/** A number; null for the placeholders nvidia-smi prints ('[N/A]', '[Not Supported]', blank); undefined if garbage. */
function parseMeasurement(cell: string): number | null | undefined {
  if (cell === '' || cell === 'N/A' || /^\[[^\]]*\]$/.test(cell)) return null;
  if (!/^\d+(?:\.\d+)?$/.test(cell)) return undefined;
  return Number(cell);
}

function parseNonNegativeInt(text: string | undefined): number | null {
  if (text === undefined || !/^\d+$/.test(text)) return null;
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : null;
}
