import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clockTicksPerSecond, readProcessTable } from '../../worker-gate/process-table.ts';
import { RunCgroupHost } from '../../worker-gate/run-cgroups/index.ts';
import { evaluateQuietWindow, NO_GPU_TELEMETRY_REASON } from '../../worker-gate/domain/quiet-window.ts';
import { quietWindowWait } from '../../worker-gate/domain/quiet-window-wait.ts';
import { pinnedMachineGpuUse, runCpuPercent, runGpuUse, vramBaselineOf, type RunCpuUsage, type RunGpuReading } from '../../worker-gate/domain/run-machine-share.ts';
import type { GateThresholdProfile } from '../../worker-gate/contract/workload.ts';
import { processCpuUsage, RunUsageMeter } from '../../worker-gate/telemetry/run-usage.ts';

const T0 = 1_700_000_000_000;
const INTERVAL_MS = 10_000;
const RUN_PID = 4242;
const OTHER_PID = 7777;

const PROFILE: GateThresholdProfile = {
  idle_sustain_sec: 30,
  cpu_idle_threshold_pct: 20,
  gpu_idle_avg_threshold_pct: 10,
  gpu_idle_peak_threshold_pct: 20,
  vram_delta_threshold_mib: 1024,
};

/** Two GPUs, index 0 (GPU-a) and 1 (GPU-b): the run's process is on GPU-a; another machine user's process on GPU-b keeps it 100 % busy. */
function gpuReading(apps: { pid: number; mib: number | null; gpu: string | null }[], utilisation: { a: number; b: number }, memory = { a: 1000, b: 70_000 }): RunGpuReading {
  return {
    kind: 'read',
    reading: {
      gpus: [
        { index: 0, utilization_pct: utilisation.a, memory_used_mib: memory.a, uuid: 'GPU-a' },
        { index: 1, utilization_pct: utilisation.b, memory_used_mib: memory.b, uuid: 'GPU-b' },
      ],
      computeApps: apps.map((app) => ({ pid: app.pid, used_memory_mib: app.mib, gpu_uuid: app.gpu })),
    },
  };
}

const cgroupAt = (usec: number): RunCpuUsage => ({ kind: 'cgroup', usec });

/**
 * Feeds the meter one sample per interval after the run's processes exited (idle seen at T0), the run's cgroup using
 * `cpuCoresUsed` cores and the GPU as `gpu` says, and judges the run's window as the gate does in scope 'run'.
 */
function judge(samples: number, cpuCoresUsed: number, gpu: RunGpuReading, pids: number[] = [], gpuIndices: readonly number[] | null = null) {
  const meter = new RunUsageMeter(50);
  let usec = 0;
  for (let i = 0; i <= samples; i++) {
    meter.record('run-1', T0 + i * INTERVAL_MS, cgroupAt(usec), gpu, pids, gpuIndices);
    usec += cpuCoresUsed * INTERVAL_MS * 1000;
  }
  const recorded = meter.samples('run-1');
  return evaluateQuietWindow({
    profile: PROFILE,
    sampleIntervalSec: INTERVAL_MS / 1000,
    samples: recorded,
    vramBaselineMib: 0,
    idleSeenAtMs: T0 + 1,
    processesAlive: false,
    lastProcessAliveAtMs: T0,
    nowMs: recorded.at(-1)!.at_ms,
    maxWaitAfterIdleSec: 3600,
  });
}

describe("the run's own CPU", () => {
  it('is its cgroup time over the interval, as a percentage of one core', () => {
    expect(runCpuPercent({ at_ms: T0, usage: cgroupAt(0) }, { at_ms: T0 + 1000, usage: cgroupAt(630_000) })).toBeCloseTo(63);
    expect(runCpuPercent({ at_ms: T0, usage: cgroupAt(0) }, { at_ms: T0 + 1000, usage: cgroupAt(2_000_000) })).toBeCloseTo(200);
  });

  it('is the sum of its live processes over the interval; an exited process drops out, a reused pid is another process', () => {
    const before = processCpuUsage([{ pid: 10, startTicks: 1, cpuTicks: 100 }, { pid: 11, startTicks: 2, cpuTicks: 50 }], 100);
    const after = processCpuUsage([{ pid: 10, startTicks: 1, cpuTicks: 150 }, { pid: 11, startTicks: 9, cpuTicks: 20 }], 100);
    // pid 10 used 50 ticks; pid 11 is a new process (another start time) that used 20: 70 ticks in 1 s = 70 %.
    expect(runCpuPercent({ at_ms: T0, usage: before }, { at_ms: T0 + 1000, usage: after })).toBeCloseTo(70);
  });

  it('has no figure for the first reading or when the kind of counter changes', () => {
    expect(runCpuPercent(null, { at_ms: T0, usage: cgroupAt(5) })).toBeNull();
    expect(runCpuPercent({ at_ms: T0, usage: processCpuUsage([], 100) }, { at_ms: T0 + 1000, usage: cgroupAt(5) })).toBeNull();
  });
});

describe("the run's own CPU, read from the machine", () => {
  it("counts a busy process in the run's cgroup, both by the cgroup's counter and by the process's own, and a sleeping one as quiet", { timeout: 30_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rcp-run-usage-'));
    const host = RunCgroupHost.detect({ state_dir: dir, run_cgroup_mode: 'auto', run_cgroup_v2_root: '', run_cgroup_parent: '' });
    const noLimits = { memoryBytes: null, pidsMax: null, cpuCores: null };
    const busy = await host.create(`usage-busy-${process.pid}`, noLimits);
    const idle = await host.create(`usage-idle-${process.pid}`, noLimits);
    if (!busy || !idle) throw new Error(`this test needs run cgroups (as root, with cgroup v1 or a delegated v2): ${host.status().reason}`);
    const loop = spawn(busy.joinArgv()[0]!, [...busy.joinArgv().slice(1), 'sh', '-c', 'while :; do :; done'], { stdio: 'ignore' });
    const sleeper = spawn(idle.joinArgv()[0]!, [...idle.joinArgv().slice(1), 'sleep', '60'], { stdio: 'ignore' });
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const ticks = clockTicksPerSecond();
      const reading = () => {
        const table = readProcessTable({ withCwd: false });
        const members = (cgroup: typeof busy) => table.filter((proc) => cgroup.pids().includes(proc.pid));
        return {
          at_ms: Date.now(),
          busy: { cgroup: cgroupAt(busy.cpuUsageUsec()!), processes: processCpuUsage(members(busy), ticks) },
          idle: { cgroup: cgroupAt(idle.cpuUsageUsec()!), processes: processCpuUsage(members(idle), ticks) },
        };
      };
      const before = reading();
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const after = reading();
      const pct = (run: 'busy' | 'idle', kind: 'cgroup' | 'processes') => runCpuPercent({ at_ms: before.at_ms, usage: before[run][kind] }, { at_ms: after.at_ms, usage: after[run][kind] })!;
      // How much of a core a busy loop gets depends on what else the machine runs, so the figure is not fixed: it is
      // clearly more than nothing, and the cgroup's counter and the process's own agree on it. A sleeper uses next to nothing.
      expect(pct('busy', 'cgroup')).toBeGreaterThan(5);
      expect(Math.abs(pct('busy', 'cgroup') - pct('busy', 'processes'))).toBeLessThan(Math.max(5, pct('busy', 'cgroup') * 0.25));
      expect(pct('idle', 'cgroup')).toBeLessThan(2);
      expect(pct('idle', 'processes')).toBeLessThan(2);
    } finally {
      await busy.kill();
      await idle.kill();
      busy.remove();
      idle.remove();
      loop.kill('SIGKILL');
      sleeper.kill('SIGKILL');
      host.releaseParents();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("the run's own GPU", () => {
  it('counts the GPUs its compute processes run on and the memory they hold', () => {
    const reading = gpuReading([{ pid: RUN_PID, mib: 2048, gpu: 'GPU-a' }, { pid: OTHER_PID, mib: 70_000, gpu: 'GPU-b' }], { a: 55, b: 100 });
    expect(runGpuUse(reading, new Set([RUN_PID]))).toEqual({ gpu_pct: 55, vram_used_mib: 2048 });
  });

  it('is idle when none of the GPU processes are the run\'s', () => {
    const reading = gpuReading([{ pid: OTHER_PID, mib: 70_000, gpu: 'GPU-b' }], { a: 0, b: 100 });
    expect(runGpuUse(reading, new Set([RUN_PID]))).toEqual({ gpu_pct: 0, vram_used_mib: 0 });
  });

  it('is unknown (counted busy) when nvidia-smi failed, and absent without a GPU tool', () => {
    expect(runGpuUse({ kind: 'failed' }, new Set([RUN_PID]))).toEqual({ gpu_pct: 100, vram_used_mib: null });
    expect(runGpuUse({ kind: 'none' }, new Set([RUN_PID]))).toEqual({ gpu_pct: null, vram_used_mib: null });
  });
});

describe("the own GPU of a run given GPUs (gpu_indices)", () => {
  it('reads only its own GPUs: its processes there count, its processes on another GPU do not', () => {
    const reading = gpuReading([{ pid: RUN_PID, mib: 2048, gpu: 'GPU-a' }, { pid: RUN_PID, mib: 512, gpu: 'GPU-b' }], { a: 55, b: 100 });
    expect(runGpuUse(reading, new Set([RUN_PID]), [0])).toEqual({ gpu_pct: 55, vram_used_mib: 2048 });
    expect(runGpuUse(reading, new Set([RUN_PID]), [1])).toEqual({ gpu_pct: 100, vram_used_mib: 512 });
    // Unpinned, the same reading counts both.
    expect(runGpuUse(reading, new Set([RUN_PID]))).toEqual({ gpu_pct: 100, vram_used_mib: 2560 });
  });

  it('counts a process of its own whose GPU is not named against its own GPUs only', () => {
    const reading = gpuReading([{ pid: RUN_PID, mib: 300, gpu: null }], { a: 40, b: 100 });
    expect(runGpuUse(reading, new Set([RUN_PID]), [0])).toEqual({ gpu_pct: 40, vram_used_mib: 300 });
  });

  it('is unused for a run given no GPU ([]), whatever the GPUs and the query say', () => {
    const busy = gpuReading([{ pid: RUN_PID, mib: 4096, gpu: 'GPU-a' }], { a: 100, b: 100 });
    expect(runGpuUse(busy, new Set([RUN_PID]), [])).toEqual({ gpu_pct: 0, vram_used_mib: 0 });
    expect(runGpuUse({ kind: 'failed' }, new Set([RUN_PID]), [])).toEqual({ gpu_pct: 0, vram_used_mib: 0 });
  });

  it("closes the run's window while another run's process works on another GPU, and keeps it open while its own works", () => {
    const otherGpuBusy = gpuReading([{ pid: RUN_PID, mib: 4096, gpu: 'GPU-b' }], { a: 0, b: 95 });
    expect(judge(3, 0, otherGpuBusy, [RUN_PID], [0])).toMatchObject({ verdict: 'ready' });
    expect(judge(3, 0, otherGpuBusy, [RUN_PID], [1]).reasons).toEqual([
      'mean GPU 95% above threshold 10%',
      'peak GPU 95% above threshold 20%',
      'VRAM 4096 MiB above dispatch baseline (threshold 1024 MiB)',
    ]);
  });
});

describe("a run given GPUs, judged on the machine (quiet_window_scope 'machine')", () => {
  it('reads the busiest of its own GPUs and the memory used on them, whoever uses it', () => {
    const reading = gpuReading([{ pid: OTHER_PID, mib: 60_000, gpu: 'GPU-b' }], { a: 7, b: 100 }, { a: 1500, b: 70_000 });
    expect(pinnedMachineGpuUse(reading, [0])).toEqual({ gpu_pct: 7, vram_used_mib: 1500 });
    expect(pinnedMachineGpuUse(reading, [0, 1])).toEqual({ gpu_pct: 100, vram_used_mib: 71_500 });
    expect(pinnedMachineGpuUse(reading, [])).toEqual({ gpu_pct: 0, vram_used_mib: 0 });
  });

  it('counts its GPUs busy when the query failed or gave no utilisation of them, and absent without a GPU tool', () => {
    expect(pinnedMachineGpuUse({ kind: 'failed' }, [0])).toEqual({ gpu_pct: 100, vram_used_mib: null });
    expect(pinnedMachineGpuUse(gpuReading([], { a: 0, b: 0 }), [5])).toEqual({ gpu_pct: 100, vram_used_mib: null });
    expect(pinnedMachineGpuUse({ kind: 'none' }, [0])).toEqual({ gpu_pct: null, vram_used_mib: null });
  });

  it('takes its VRAM baseline on its own GPUs, else on every GPU', () => {
    const reading = gpuReading([], { a: 0, b: 0 }, { a: 1500, b: 70_000 });
    expect(vramBaselineOf(reading, [1], 71_500)).toBe(70_000);
    expect(vramBaselineOf(reading, [], 71_500)).toBe(0);
    expect(vramBaselineOf(reading, null, 71_500)).toBe(71_500);
  });

  it("is ready while another run's GPU is busy, where the machine's busiest GPU would keep it waiting", () => {
    const others = gpuReading([{ pid: OTHER_PID, mib: 60_000, gpu: 'GPU-b' }], { a: 2, b: 97 });
    const samples = [1, 2, 3].map((i) => ({ at_ms: T0 + i * INTERVAL_MS, cpu_pct: 5, ...pinnedMachineGpuUse(others, [0]) }));
    const window = (list: typeof samples) =>
      evaluateQuietWindow({ profile: PROFILE, sampleIntervalSec: INTERVAL_MS / 1000, samples: list, vramBaselineMib: 1000, idleSeenAtMs: T0 + 1, processesAlive: false, lastProcessAliveAtMs: T0, nowMs: T0 + 3 * INTERVAL_MS, maxWaitAfterIdleSec: 3600 });
    expect(window(samples)).toMatchObject({ verdict: 'ready', reasons: [] });
    const machineWide = samples.map((sample) => ({ ...sample, gpu_pct: 97 }));
    expect(window(machineWide).reasons).toEqual(['mean GPU 97% above threshold 10%', 'peak GPU 97% above threshold 20%']);
  });
});

describe('the quiet window judged on the run', () => {
  it('is ready when the run is quiet, however busy the rest of the machine is', () => {
    const othersBusy = gpuReading([{ pid: OTHER_PID, mib: 70_000, gpu: 'GPU-b' }], { a: 100, b: 100 });
    expect(judge(3, 0.01, othersBusy, [RUN_PID])).toMatchObject({ verdict: 'ready', reasons: [] });
  });

  it("keeps waiting, with the reason, while the run's own CPU is above the threshold", () => {
    const verdict = judge(3, 0.63, gpuReading([], { a: 0, b: 0 }));
    expect(verdict.verdict).toBe('waiting_for_quiet_window');
    expect(verdict.reasons).toEqual(['mean CPU 63% above threshold 20%']);
    expect(verdict.metrics).toMatchObject({ samples_in_window: 3, samples_needed: 3 });
  });

  it("keeps waiting while the run's own GPU process works and holds memory", () => {
    const busy = gpuReading([{ pid: RUN_PID, mib: 4096, gpu: 'GPU-a' }], { a: 80, b: 0 });
    const verdict = judge(3, 0, busy, [RUN_PID]);
    expect(verdict.verdict).toBe('waiting_for_quiet_window');
    expect(verdict.reasons).toEqual([
      'mean GPU 80% above threshold 10%',
      'peak GPU 80% above threshold 20%',
      'VRAM 4096 MiB above dispatch baseline (threshold 1024 MiB)',
    ]);
  });

  it("ignores other processes' GPU work, even on the GPU the run used", () => {
    const shared = gpuReading([{ pid: OTHER_PID, mib: 30_000, gpu: 'GPU-a' }], { a: 95, b: 0 });
    expect(judge(3, 0, shared, [RUN_PID])).toMatchObject({ verdict: 'ready' });
  });

  it('says the GPU is treated as idle where no GPU tool answers', () => {
    expect(judge(2, 0.63, { kind: 'none' }).reasons).toEqual(['collecting quiet samples: 2 of 3', NO_GPU_TELEMETRY_REASON]);
  });
});

describe('how long a run waits on its window', () => {
  it('is overdue, needing a person, past three times idle_sustain_sec without being ready', () => {
    const wait = (waitedSec: number, ready = false) => quietWindowWait({ scope: 'run', idleSeenAtMs: T0, nowMs: T0 + waitedSec * 1000, idleSustainSec: 30, ready });
    expect(wait(90)).toEqual({ scope: 'run', idle_sustain_sec: 30, waiting_sec: 90, overdue: false });
    expect(wait(91).overdue).toBe(true);
    expect(wait(5000, true).overdue).toBe(false);
  });
});

describe('RunUsageMeter', () => {
  it('keeps a bounded series per run and forgets runs no longer watched', () => {
    const meter = new RunUsageMeter(2);
    for (let i = 0; i < 5; i++) meter.record('a', T0 + i * 1000, cgroupAt(i * 1000), { kind: 'none' }, []);
    meter.record('b', T0, cgroupAt(0), { kind: 'none' }, []);
    expect(meter.samples('a').map((s) => s.at_ms)).toEqual([T0 + 3000, T0 + 4000]);
    meter.keepOnly(new Set(['b']));
    expect(meter.samples('a')).toEqual([]);
    expect(meter.samples('b')).toHaveLength(1);
  });
});
