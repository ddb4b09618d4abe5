import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  clockTicksPerSecond,
  processStartedAtMs,
  readCmdline,
  readProcessStat,
  readProcessTable,
  type ProcessInfo,
} from '../../worker-gate/process-table.ts';
import { findTrackedProcesses, insideDir, type TrackingTarget } from '../../worker-gate/process-tracking.ts';
import { reapProcesses, selectStaleProcesses, type StaleSelectionOptions } from '../../worker-gate/stale-reaper.ts';
import { isProcessAlive } from '../support/process.ts';

const PROJECT = '/work/projects/proj';

function proc(pid: number, ppid: number, extra: Partial<ProcessInfo> = {}): ProcessInfo {
  return { pid, ppid, pgrp: pid, comm: `p${pid}`, state: 'S', startTicks: 1000 + pid, cwd: '/', ...extra };
}

function target(extra: Partial<TrackingTarget> = {}): TrackingTarget {
  return { projectDir: PROJECT, known: [], ...extra };
}

const pids = (infos: ProcessInfo[]): number[] => infos.map((info) => info.pid);

const tmpDirs: string[] = [];
function makeTmpDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'process-tracking-test-'));
  tmpDirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of tmpDirs) rmSync(dir, { recursive: true, force: true });
});

describe('insideDir', () => {
  it('matches the directory and paths below it by whole segments', () => {
    const inProject = insideDir('/p/proj');
    expect(inProject('/p/proj')).toBe(true);
    expect(inProject('/p/proj/')).toBe(true);
    expect(inProject('/p/proj/src/deep')).toBe(true);
    expect(inProject('/p/proj-1')).toBe(false);
    expect(inProject('/p/projx/src')).toBe(false);
    expect(inProject('/p')).toBe(false);
    expect(inProject('/p/proj/../other')).toBe(false);
  });

  it('ignores a trailing slash on the directory and counts a removed cwd', () => {
    const inProject = insideDir('/p/proj/');
    expect(inProject('/p/proj/build')).toBe(true);
    expect(inProject('/p/proj/build (deleted)')).toBe(true);
    expect(inProject('/p/proj-1 (deleted)')).toBe(false);
  });
});

describe('findTrackedProcesses', () => {
  it('takes exactly the members of the run\'s cgroup when it has one, wherever they work and whatever their session', () => {
    // 30 left the project in a session of its own (reparented to 1); 12 works in the project but is another run's.
    const table = [proc(1, 0), proc(11, 1), proc(12, 1, { cwd: PROJECT }), proc(30, 1, { pgrp: 30, cwd: '/' }), proc(31, 30, { state: 'Z' })];
    const result = findTrackedProcesses(table, target({ rootPid: 11, rootStartTicks: 1011, processGroupId: 11, cgroupPids: [11, 30, 31, 99] }));
    expect(pids(result.alive)).toEqual([11, 30]);
    expect(result.rootAlive).toBe(true);
    expect(findTrackedProcesses(table, target({ rootPid: 11, cgroupPids: [30] })).rootAlive).toBe(false);
  });

  it('tracks the root and all its descendants, not its parent or siblings', () => {
    const table = [proc(1, 0), proc(10, 1), proc(11, 10), proc(12, 11), proc(13, 12), proc(20, 1), proc(21, 20)];
    const result = findTrackedProcesses(table, target({ rootPid: 11, rootStartTicks: 1011 }));
    expect(pids(result.alive)).toEqual([11, 12, 13]);
    expect(result.rootAlive).toBe(true);
  });

  it('does not take a reused root pid for the root', () => {
    const table = [proc(1, 0), proc(11, 1, { startTicks: 99_999 }), proc(12, 11)];
    const result = findTrackedProcesses(table, target({ rootPid: 11, rootStartTicks: 1011 }));
    expect(result.alive).toEqual([]);
    expect(result.rootAlive).toBe(false);
  });

  it('accepts the root pid by pid alone when no start time is given', () => {
    const table = [proc(1, 0), proc(11, 1, { startTicks: 99_999 })];
    const result = findTrackedProcesses(table, target({ rootPid: 11 }));
    expect(pids(result.alive)).toEqual([11]);
    expect(result.rootAlive).toBe(true);
  });

  it('tracks every member of the process group and their descendants', () => {
    const table = [proc(1, 0), proc(30, 1, { pgrp: 30 }), proc(31, 1, { pgrp: 30 }), proc(32, 31, { pgrp: 32 }), proc(40, 1, { pgrp: 40 })];
    const result = findTrackedProcesses(table, target({ processGroupId: 30 }));
    expect(pids(result.alive)).toEqual([30, 31, 32]);
    expect(result.rootAlive).toBe(false);
  });

  it('tracks processes working inside the project directory, by path segment', () => {
    const table = [
      proc(1, 0),
      proc(50, 1, { cwd: PROJECT }),
      proc(51, 1, { cwd: `${PROJECT}/src` }),
      proc(52, 1, { cwd: `${PROJECT}-1` }),
      proc(53, 1, { cwd: null }),
      proc(54, 51, { cwd: '/tmp' }),
    ];
    expect(pids(findTrackedProcesses(table, target()).alive)).toEqual([50, 51, 54]);
  });

  it('tracks known processes only while their start time still matches', () => {
    const table = [proc(1, 0), proc(60, 1), proc(61, 1, { startTicks: 5 }), proc(62, 60)];
    const known = [
      { pid: 60, startTicks: 1060 },
      { pid: 61, startTicks: 1061 },
      { pid: 63, startTicks: 1063 },
    ];
    expect(pids(findTrackedProcesses(table, target({ known })).alive)).toEqual([60, 62]);
  });

  it('counts zombies as exited, the root included', () => {
    const table = [proc(1, 0), proc(70, 1, { state: 'Z' }), proc(71, 1, { pgrp: 70, state: 'Z' }), proc(72, 1, { pgrp: 70 })];
    const result = findTrackedProcesses(table, target({ rootPid: 70, rootStartTicks: 1070, processGroupId: 70 }));
    expect(pids(result.alive)).toEqual([72]);
    expect(result.rootAlive).toBe(false);
  });

  it('lists each process once even when several rules select it', () => {
    const table = [proc(1, 0), proc(80, 1, { pgrp: 80, cwd: PROJECT }), proc(81, 80, { pgrp: 80, cwd: PROJECT })];
    const result = findTrackedProcesses(
      table,
      target({ rootPid: 80, processGroupId: 80, known: [{ pid: 81, startTicks: 1081 }] }),
    );
    expect(pids(result.alive)).toEqual([80, 81]);
  });
});

describe('selectStaleProcesses', () => {
  const btimeSec = 1_000;
  const ticksPerSec = 100;
  const nowMs = (btimeSec + 10_000) * 1000;
  const graceSec = 900;
  // startTicks at which a process is exactly graceSec old at nowMs
  const ticksAtGrace = (10_000 - graceSec) * ticksPerSec;
  const old = ticksAtGrace - 1;

  function options(extra: Partial<StaleSelectionOptions> = {}): StaleSelectionOptions {
    return {
      projectDir: PROJECT,
      nowMs,
      btimeSec,
      ticksPerSec,
      graceSec,
      markers: ['python', 'Torchrun'],
      gpuPids: [],
      cmdlineOf: () => null,
      excludePids: [],
      ...extra,
    };
  }

  it('selects old processes in the project whose command line matches a marker, case-insensitively', () => {
    const table = [
      proc(100, 1, { cwd: PROJECT, startTicks: old }),
      proc(101, 1, { cwd: `${PROJECT}/runs`, startTicks: old }),
      proc(102, 1, { cwd: PROJECT, startTicks: old }),
    ];
    const argv: Record<number, string[]> = {
      100: ['/usr/bin/PYTHON3', 'train.py'],
      101: ['TORCHRUN', '--nproc', '8'],
      102: ['bash', '-l'],
    };
    const selected = selectStaleProcesses(table, options({ cmdlineOf: (pid) => argv[pid] ?? null }));
    expect(pids(selected)).toEqual([100, 101]);
  });

  it('falls back to comm when the command line is unreadable or empty', () => {
    const table = [
      proc(110, 1, { cwd: PROJECT, startTicks: old, comm: 'python3' }),
      proc(111, 1, { cwd: PROJECT, startTicks: old, comm: 'bash' }),
    ];
    const selected = selectStaleProcesses(table, options({ cmdlineOf: (pid) => (pid === 110 ? [] : null) }));
    expect(pids(selected)).toEqual([110]);
  });

  it('is not stale at exactly the grace age, and is one tick later', () => {
    const table = [
      proc(120, 1, { cwd: PROJECT, startTicks: ticksAtGrace, comm: 'python' }),
      proc(121, 1, { cwd: PROJECT, startTicks: ticksAtGrace - 1, comm: 'python' }),
      proc(122, 1, { cwd: PROJECT, startTicks: ticksAtGrace + 1, comm: 'python' }),
    ];
    expect(processStartedAtMs(ticksAtGrace, btimeSec, ticksPerSec)).toBe(nowMs - graceSec * 1000);
    expect(pids(selectStaleProcesses(table, options()))).toEqual([121]);
  });

  it('selects a GPU-holding process in the project whatever its command', () => {
    const table = [
      proc(130, 1, { cwd: PROJECT, startTicks: old, comm: 'worker' }),
      proc(131, 1, { cwd: '/elsewhere', startTicks: old, comm: 'worker' }),
      proc(132, 1, { cwd: PROJECT, startTicks: ticksAtGrace + 100, comm: 'worker' }),
    ];
    expect(pids(selectStaleProcesses(table, options({ gpuPids: [130, 131, 132] })))).toEqual([130]);
  });

  it('never selects excluded pids, zombies, processes outside the project or with unknown cwd', () => {
    const table = [
      proc(140, 1, { cwd: PROJECT, startTicks: old, comm: 'python' }),
      proc(141, 1, { cwd: PROJECT, startTicks: old, comm: 'python', state: 'Z' }),
      proc(142, 1, { cwd: `${PROJECT}-1`, startTicks: old, comm: 'python' }),
      proc(143, 1, { cwd: null, startTicks: old, comm: 'python' }),
      proc(144, 1, { cwd: PROJECT, startTicks: old, comm: 'python' }),
    ];
    expect(pids(selectStaleProcesses(table, options({ excludePids: [140], gpuPids: [140] })))).toEqual([144]);
  });

  it('selects nothing by command when no markers are configured', () => {
    const table = [proc(150, 1, { cwd: PROJECT, startTicks: old, comm: 'python' })];
    expect(selectStaleProcesses(table, options({ markers: ['', '  '] }))).toEqual([]);
  });
});

function writeFakeStat(root: string, pid: number, fields: { ppid?: number; pgrp?: number; state?: string; comm?: string; startTicks: number }): void {
  const dir = join(root, String(pid));
  mkdirSync(dir, { recursive: true });
  const { ppid = 1, pgrp = pid, state = 'S', comm = `p${pid}`, startTicks } = fields;
  writeFileSync(
    join(dir, 'stat'),
    `${pid} (${comm}) ${state} ${ppid} ${pgrp} ${pgrp} 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 ${startTicks} 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n`,
  );
}

describe('readProcessTable', () => {
  it('reads every numeric entry of a proc root, skipping vanished and unreadable ones', () => {
    const root = makeTmpDir();
    writeFakeStat(root, 100, { ppid: 1, startTicks: 500, comm: 'agent (main)' });
    symlinkSync('/work/projects/proj', join(root, '100', 'cwd'));
    writeFakeStat(root, 101, { ppid: 100, pgrp: 100, state: 'Z', startTicks: 600 });
    // 102 vanished between readdir and the stat read: only an empty directory is left.
    mkdirSync(join(root, '102'));
    // 103's cwd is not a link (EINVAL) and 104's stat is garbage. Each stat holds utime 5 and stime 3: 8 ticks of CPU.
    writeFakeStat(root, 103, { startTicks: 700 });
    writeFileSync(join(root, '103', 'cwd'), '');
    mkdirSync(join(root, '104'));
    writeFileSync(join(root, '104', 'stat'), 'garbage');
    mkdirSync(join(root, 'sys'));
    writeFileSync(join(root, 'stat'), 'cpu  1 2 3 4\n');

    const table = readProcessTable({ procRoot: root }).sort((a, b) => a.pid - b.pid);
    expect(table).toEqual([
      { pid: 100, ppid: 1, pgrp: 100, comm: 'agent (main)', state: 'S', startTicks: 500, cpuTicks: 8, cwd: '/work/projects/proj' },
      { pid: 101, ppid: 100, pgrp: 100, comm: 'p101', state: 'Z', startTicks: 600, cpuTicks: 8, cwd: null },
      { pid: 103, ppid: 1, pgrp: 103, comm: 'p103', state: 'S', startTicks: 700, cpuTicks: 8, cwd: null },
    ]);
    expect(readProcessTable({ procRoot: root, withCwd: false }).find((info) => info.pid === 100)?.cwd).toBeNull();
  });

  it('finds this test process in the real /proc with its parent, cwd and start time', () => {
    const table = readProcessTable();
    const self = table.find((info) => info.pid === process.pid);
    expect(self).toMatchObject({ pid: process.pid, ppid: process.ppid, cwd: process.cwd(), state: expect.stringMatching(/^[RS]$/) });
    expect(self?.startTicks).toBe(readProcessStat(process.pid)?.startTicks);
    expect(table.some((info) => info.pid === process.ppid)).toBe(true);
  });

  it('reads a command line as argv', () => {
    expect(readCmdline(process.pid)).toContain(process.argv[1]);
    const root = makeTmpDir();
    mkdirSync(join(root, '7'));
    writeFileSync(join(root, '7', 'cmdline'), 'python3\0train.py\0--lr\0\0.1\0');
    writeFileSync(join(root, '7', 'stat'), '');
    mkdirSync(join(root, '8'));
    writeFileSync(join(root, '8', 'cmdline'), '');
    expect(readCmdline(7, root)).toEqual(['python3', 'train.py', '--lr', '', '.1']);
    expect(readCmdline(8, root)).toEqual([]);
    expect(readCmdline(9, root)).toBeNull();
  });

  it('knows the clock tick rate and turns start ticks into epoch milliseconds', () => {
    const ticks = clockTicksPerSecond();
    expect(Number.isInteger(ticks) && ticks > 0).toBe(true);
    expect(clockTicksPerSecond()).toBe(ticks);
    expect(processStartedAtMs(250, 1_700_000_000, 100)).toBe(1_700_000_002_500);
  });
});

interface Child {
  child: ChildProcess;
  pid: number;
  startTicks: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

/** A node child that has finished starting (it says "ready" once its handlers are installed). */
async function spawnChild(script: string): Promise<Child> {
  const child = spawn(process.execPath, ['-e', `${script}; setInterval(() => {}, 1000); console.log('ready');`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) resolve();
    });
    child.once('exit', () => reject(new Error('child exited before it was ready')));
  });
  const pid = child.pid!;
  const stat = readProcessStat(pid);
  if (!stat) throw new Error(`no /proc entry for child ${pid}`);
  return { child, pid, startTicks: stat.startTicks, exited };
}

describe('reapProcesses on real processes', () => {
  it('terminates a process that obeys SIGTERM', async () => {
    const victim = await spawnChild('');
    const results = await reapProcesses([{ pid: victim.pid, startTicks: victim.startTicks }], { termGraceSec: 5 });
    expect(results).toEqual([{ pid: victim.pid, outcome: 'terminated' }]);
    expect(await victim.exited).toEqual({ code: null, signal: 'SIGTERM' });
  });

  it('kills a process that ignores SIGTERM once the grace time is over', async () => {
    const victim = await spawnChild("process.on('SIGTERM', () => {})");
    const started = Date.now();
    const results = await reapProcesses([{ pid: victim.pid, startTicks: victim.startTicks }], { termGraceSec: 0.5 });
    expect(results).toEqual([{ pid: victim.pid, outcome: 'killed' }]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect(await victim.exited).toEqual({ code: null, signal: 'SIGKILL' });
  });

  it('leaves a process alone when its start time differs from the one given (pid reuse)', async () => {
    const victim = await spawnChild('');
    const results = await reapProcesses([{ pid: victim.pid, startTicks: victim.startTicks + 1 }], { termGraceSec: 0.2 });
    expect(results).toEqual([{ pid: victim.pid, outcome: 'skipped_pid_reused' }]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(isProcessAlive(victim.pid)).toBe(true);
    expect(victim.child.exitCode).toBeNull();
  });

  it('handles several victims at once', async () => {
    const [obeys, ignores] = await Promise.all([spawnChild(''), spawnChild("process.on('SIGTERM', () => {})")]);
    const results = await reapProcesses(
      [
        { pid: obeys.pid, startTicks: obeys.startTicks },
        { pid: ignores.pid, startTicks: ignores.startTicks },
      ],
      { termGraceSec: 0.5 },
    );
    expect(results).toEqual([
      { pid: obeys.pid, outcome: 'terminated' },
      { pid: ignores.pid, outcome: 'killed' },
    ]);
  });
});

describe('reapProcesses on a fake proc root', () => {
  it('reports a process that is already gone without signalling it', async () => {
    const root = makeTmpDir();
    const signals: string[] = [];
    const results = await reapProcesses([{ pid: 4242, startTicks: 1 }], {
      termGraceSec: 1,
      procRoot: root,
      kill: (pid, signal) => signals.push(`${pid}:${signal}`),
    });
    expect(results).toEqual([{ pid: 4242, outcome: 'gone' }]);
    expect(signals).toEqual([]);
  });

  it('does not send SIGKILL once the pid names another process', async () => {
    const root = makeTmpDir();
    writeFakeStat(root, 500, { startTicks: 10 });
    const signals: string[] = [];
    const results = await reapProcesses([{ pid: 500, startTicks: 10 }], {
      termGraceSec: 0.3,
      procRoot: root,
      pollIntervalMs: 20,
      kill: (pid, signal) => {
        signals.push(`${pid}:${signal}`);
        // The process exits late in the grace time and its pid is taken by another one at once.
        setTimeout(() => writeFakeStat(root, 500, { startTicks: 11 }), 150);
      },
    });
    expect(signals).toEqual(['500:SIGTERM']);
    expect(results).toEqual([{ pid: 500, outcome: 'terminated' }]);
  });

  it('treats a process that turned zombie as gone', async () => {
    const root = makeTmpDir();
    writeFakeStat(root, 501, { startTicks: 10 });
    const results = await reapProcesses([{ pid: 501, startTicks: 10 }], {
      termGraceSec: 1,
      procRoot: root,
      pollIntervalMs: 10,
      kill: () => writeFakeStat(root, 501, { startTicks: 10, state: 'Z' }),
    });
    expect(results).toEqual([{ pid: 501, outcome: 'terminated' }]);
  });

  it('reports a signal that cannot be sent', async () => {
    const root = makeTmpDir();
    writeFakeStat(root, 502, { startTicks: 10 });
    const results = await reapProcesses([{ pid: 502, startTicks: 10 }], {
      termGraceSec: 1,
      procRoot: root,
      kill: () => {
        throw Object.assign(new Error('kill EPERM'), { code: 'EPERM' });
      },
    });
    expect(results).toEqual([{ pid: 502, outcome: 'error', error: 'SIGTERM: kill EPERM' }]);
  });
});
