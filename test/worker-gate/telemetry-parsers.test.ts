import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createNvidiaSmiProbe, type GpuProbe } from '../../worker-gate/telemetry/gpu.ts';
import {
  cpuPercentBetween,
  parseMeminfo,
  parseNvidiaSmiComputeApps,
  parseNvidiaSmiGpus,
  parseProcPidStat,
  parseProcStat,
} from '../../worker-gate/telemetry/proc-parsers.ts';
import { FIRST_CPU_READING_NOTE, NO_GPU_TOOL_NOTE, TelemetrySampler } from '../../worker-gate/telemetry/sampler.ts';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'telemetry');
const fixture = (name: string): string => readFileSync(join(FIXTURES, name), 'utf8');

const tmpDirs: string[] = [];
function makeTmpDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'telemetry-test-'));
  tmpDirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of tmpDirs) rmSync(dir, { recursive: true, force: true });
});

describe('parseProcStat', () => {
  it('sums user..steal and counts idle + iowait from a recorded /proc/stat', () => {
    // cpu  8113 0 2283 43326 244 0 118 77 0 0
    expect(parseProcStat(fixture('proc-stat.txt'))).toEqual({
      cpu: { total: 54161, idle: 43570 },
      btimeSec: 1795310583,
    });
  });

  it('leaves guest and guest_nice out of the total (they are already inside user and nice)', () => {
    const stat = parseProcStat('cpu  100 10 50 800 20 0 5 15 70 7\nbtime 5\n');
    expect(stat).toEqual({ cpu: { total: 1000, idle: 820 }, btimeSec: 5 });
  });

  it('reads the aggregate line, not a per-cpu one, and tolerates a missing btime', () => {
    const stat = parseProcStat('cpu0 1 1 1 1 1 1 1 1\ncpu  10 0 10 80 0 0 0 0\n');
    expect(stat).toEqual({ cpu: { total: 100, idle: 80 }, btimeSec: null });
  });

  it('returns null for malformed input', () => {
    expect(parseProcStat('')).toBeNull();
    expect(parseProcStat('cpu  a b c d e\n')).toBeNull();
    expect(parseProcStat('cpu  1 2 3\n')).toBeNull();
    expect(parseProcStat(fixture('meminfo.txt'))).toBeNull();
  });
});

describe('cpuPercentBetween', () => {
  it('is the busy share of elapsed CPU time, rounded to 0.1', () => {
    expect(cpuPercentBetween({ total: 1000, idle: 800 }, { total: 1300, idle: 1000 })).toBe(33.3);
    expect(cpuPercentBetween({ total: 0, idle: 0 }, { total: 400, idle: 0 })).toBe(100);
    expect(cpuPercentBetween({ total: 0, idle: 0 }, { total: 400, idle: 400 })).toBe(0);
  });

  it('is null when no time has passed or the counters went backwards', () => {
    expect(cpuPercentBetween({ total: 500, idle: 100 }, { total: 500, idle: 100 })).toBeNull();
    expect(cpuPercentBetween({ total: 500, idle: 100 }, { total: 400, idle: 100 })).toBeNull();
  });

  it('works on two parsed readings', () => {
    const first = parseProcStat(fixture('proc-stat.txt'))!;
    const second = parseProcStat('cpu  8213 0 2383 43526 244 0 118 77 0 0\n')!;
    // 400 more jiffies, 200 of them idle
    expect(cpuPercentBetween(first.cpu, second.cpu)).toBe(50);
  });
});

describe('parseMeminfo', () => {
  it('is MemAvailable + SwapFree in MiB on a recorded /proc/meminfo', () => {
    expect(parseMeminfo(fixture('meminfo.txt'))).toEqual({
      memory_available_mib: 23438,
      memory_source: 'MemAvailable+SwapFree',
    });
  });

  it('adds free swap', () => {
    const text = 'MemTotal: 8000000 kB\nMemAvailable:    1048576 kB\nSwapTotal: 4194304 kB\nSwapFree:    2097152 kB\n';
    expect(parseMeminfo(text)).toEqual({ memory_available_mib: 3072, memory_source: 'MemAvailable+SwapFree' });
  });

  it('falls back to MemFree + Buffers + Cached on kernels without MemAvailable', () => {
    expect(parseMeminfo(fixture('meminfo-no-memavailable.txt'))).toEqual({
      memory_available_mib: 23646,
      memory_source: 'MemFree+Buffers+Cached+SwapFree',
    });
  });

  it('returns null when nothing usable is there', () => {
    expect(parseMeminfo('')).toBeNull();
    expect(parseMeminfo('MemTotal: 100 kB\nSwapFree: 10 kB\n')).toBeNull();
    expect(parseMeminfo('garbage\n')).toBeNull();
  });
});

describe('parseProcPidStat', () => {
  it('reads a recorded /proc/self/stat', () => {
    expect(parseProcPidStat(fixture('pid-stat-self.txt'))).toEqual({
      pid: 6186,
      comm: 'cat',
      state: 'R',
      ppid: 6181,
      pgrp: 6181,
      session: 4887,
      startTicks: 27219,
      cpuTicks: 0,
    });
  });

  it('splits at the last ")" so a comm with spaces and parentheses does not shift the fields', () => {
    expect(parseProcPidStat(fixture('pid-stat-odd-comm.txt'))).toMatchObject({
      pid: 6186,
      comm: 'my) (weird cmd',
      state: 'S',
      ppid: 6181,
      startTicks: 27219,
    });
  });

  it('returns null for malformed or truncated input', () => {
    expect(parseProcPidStat('')).toBeNull();
    expect(parseProcPidStat('12 (bash) S 1 12')).toBeNull();
    expect(parseProcPidStat('abc (bash) S 1 12 12 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 500')).toBeNull();
    expect(parseProcPidStat('12 bash S 1 12 12 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 500')).toBeNull();
    expect(parseProcPidStat('12 (bash) S 1 12 12 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 500')).toMatchObject({ startTicks: 500 });
  });

  it('reads the CPU time used (utime + stime)', () => {
    expect(parseProcPidStat('12 (bash) S 1 12 12 0 -1 0 0 0 0 0 70 5 0 0 20 0 1 0 500')).toMatchObject({ cpuTicks: 75, startTicks: 500 });
  });
});

describe('parseNvidiaSmiGpus', () => {
  it('reads one row per GPU', () => {
    expect(parseNvidiaSmiGpus(fixture('nvidia-smi-gpus-two.csv'))).toEqual([
      { index: 0, utilization_pct: 87, memory_used_mib: 40536, memory_total_mib: 81559, uuid: null },
      { index: 1, utilization_pct: 12, memory_used_mib: 1024, memory_total_mib: 81559, uuid: null },
    ]);
  });

  it('turns [N/A], [Not Supported] and blanks into null', () => {
    expect(parseNvidiaSmiGpus(fixture('nvidia-smi-gpus-na.csv'))).toEqual([
      { index: 0, utilization_pct: null, memory_used_mib: null, memory_total_mib: 81559, uuid: null },
      { index: 1, utilization_pct: null, memory_used_mib: 512, memory_total_mib: null, uuid: null },
    ]);
  });

  it('skips malformed lines and keeps the good ones', () => {
    expect(parseNvidiaSmiGpus(fixture('nvidia-smi-gpus-partly-malformed.csv'))).toEqual([
      { index: 0, utilization_pct: 87, memory_used_mib: 40536, memory_total_mib: 81559, uuid: null },
    ]);
  });

  it('reads the uuid column that ties a compute process to its GPU', () => {
    expect(parseNvidiaSmiGpus('0, 87, 40536, 81559, GPU-aaaa\n1, 12, 1024, 81559, GPU-bbbb\n')).toEqual([
      { index: 0, utilization_pct: 87, memory_used_mib: 40536, memory_total_mib: 81559, uuid: 'GPU-aaaa' },
      { index: 1, utilization_pct: 12, memory_used_mib: 1024, memory_total_mib: 81559, uuid: 'GPU-bbbb' },
    ]);
    expect(parseNvidiaSmiComputeApps('4242, 40000, GPU-aaaa\n')).toEqual([{ pid: 4242, used_memory_mib: 40000, gpu_uuid: 'GPU-aaaa' }]);
  });

  it('yields no GPUs for empty or wholly malformed output', () => {
    expect(parseNvidiaSmiGpus(fixture('nvidia-smi-gpus-none.csv'))).toEqual([]);
    expect(parseNvidiaSmiGpus(fixture('nvidia-smi-gpus-malformed.csv'))).toEqual([]);
  });
});

describe('parseNvidiaSmiComputeApps', () => {
  it('reads pid and used memory, [N/A] as null', () => {
    expect(parseNvidiaSmiComputeApps(fixture('nvidia-smi-apps-two.csv'))).toEqual([
      { pid: 4242, used_memory_mib: 40000, gpu_uuid: null },
      { pid: 4243, used_memory_mib: null, gpu_uuid: null },
    ]);
  });

  it('yields nothing for "No running processes found" and for empty output', () => {
    expect(parseNvidiaSmiComputeApps(fixture('nvidia-smi-apps-none.csv'))).toEqual([]);
    expect(parseNvidiaSmiComputeApps('')).toEqual([]);
    expect(parseNvidiaSmiComputeApps('x, 10\n-1, 10\n5\n')).toEqual([]);
  });
});

/** A stand-in nvidia-smi: prints a GPU or a compute-apps answer depending on its arguments. */
function writeFakeNvidiaSmi(dir: string, body: string): string {
  const path = join(dir, 'nvidia-smi');
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

describe('createNvidiaSmiProbe', () => {
  it('runs both queries and parses them', async () => {
    const dir = makeTmpDir();
    const command = writeFakeNvidiaSmi(
      dir,
      [
        'case "$1" in',
        `  --query-gpu=*) cat '${join(FIXTURES, 'nvidia-smi-gpus-two.csv')}' ;;`,
        `  --query-compute-apps=*) cat '${join(FIXTURES, 'nvidia-smi-apps-two.csv')}' ;;`,
        '  *) exit 2 ;;',
        'esac',
      ].join('\n'),
    );
    const reading = await createNvidiaSmiProbe({ command, timeoutMs: 5_000 }).query();
    expect(reading?.gpus.map((gpu) => gpu.utilization_pct)).toEqual([87, 12]);
    expect(reading?.computeApps.map((app) => app.pid)).toEqual([4242, 4243]);
  });

  it('answers null when the tool is missing, and never looks for it again', async () => {
    const dir = makeTmpDir();
    const command = join(dir, 'nvidia-smi');
    const probe = createNvidiaSmiProbe({ command, timeoutMs: 5_000 });
    expect(await probe.query()).toBeNull();
    writeFakeNvidiaSmi(dir, "echo '0, 99, 1, 2'");
    expect(await probe.query()).toBeNull();
  });

  it('throws a readable error when the tool fails', async () => {
    const dir = makeTmpDir();
    const command = writeFakeNvidiaSmi(dir, "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"; exit 9");
    await expect(createNvidiaSmiProbe({ command, timeoutMs: 5_000 }).query()).rejects.toThrow(
      /exited with status 9: NVIDIA-SMI has failed/,
    );
  });

  it('throws when the tool hangs past the timeout', async () => {
    const dir = makeTmpDir();
    const command = writeFakeNvidiaSmi(dir, 'exec sleep 10');
    await expect(createNvidiaSmiProbe({ command, timeoutMs: 200 }).query()).rejects.toThrow(/timed out after 200 ms/);
  });
});

function fakeProcRoot(stat: string, meminfo: string): string {
  const root = makeTmpDir();
  writeFileSync(join(root, 'stat'), stat);
  writeFileSync(join(root, 'meminfo'), meminfo);
  return root;
}

describe('TelemetrySampler', () => {
  it('reports CPU from the second reading on and sums VRAM over GPUs', async () => {
    const root = fakeProcRoot('cpu  100 0 100 800 0 0 0 0\n', fixture('meminfo.txt'));
    const gpuProbe: GpuProbe = {
      query: async () => ({
        gpus: parseNvidiaSmiGpus(fixture('nvidia-smi-gpus-two.csv')),
        computeApps: parseNvidiaSmiComputeApps('77, 10\n5, 20\n77, 30\n'),
      }),
    };
    let clock = 1_000;
    const sampler = new TelemetrySampler({ procRoot: root, gpuProbe, now: () => clock });

    const first = await sampler.sample();
    expect(first).toEqual({
      at_ms: 1_000,
      cpu_pct: null,
      gpu_pct: 87,
      vram_used_mib: 41560,
      gpu_compute_pids: [5, 77],
      gpu_count: 2,
      gpu_source: 'nvidia-smi',
      memory_available_mib: 23438,
      memory_source: 'MemAvailable+SwapFree',
      notes: [FIRST_CPU_READING_NOTE],
    });

    writeFileSync(join(root, 'stat'), 'cpu  175 0 100 825 0 0 0 0\n');
    clock = 2_000;
    const second = await sampler.sample();
    expect(second.at_ms).toBe(2_000);
    expect(second.cpu_pct).toBe(75);
    expect(second.notes).toEqual([]);
  });

  it('reports CPU on the first sample once the counters were primed', async () => {
    const root = fakeProcRoot('cpu  100 0 100 800 0 0 0 0\n', fixture('meminfo.txt'));
    const sampler = new TelemetrySampler({ procRoot: root, gpuProbe: null });
    expect(sampler.primeCpu()).toBe(true);
    writeFileSync(join(root, 'stat'), 'cpu  150 0 100 850 0 0 0 0\n');
    const first = await sampler.sample();
    expect(first.cpu_pct).toBe(50);
    expect(first.notes).not.toContain(FIRST_CPU_READING_NOTE);
    expect(new TelemetrySampler({ procRoot: makeTmpDir(), gpuProbe: null }).primeCpu()).toBe(false);
  });

  it('treats a machine without nvidia-smi as GPU-idle and says so', async () => {
    const root = fakeProcRoot(fixture('proc-stat.txt'), fixture('meminfo.txt'));
    const sampler = new TelemetrySampler({
      procRoot: root,
      gpuProbe: createNvidiaSmiProbe({ command: join(root, 'no-such-nvidia-smi'), timeoutMs: 1_000 }),
    });
    const sample = await sampler.sample();
    expect(sample).toMatchObject({
      gpu_pct: null,
      vram_used_mib: null,
      gpu_compute_pids: [],
      gpu_count: 0,
      gpu_source: 'none',
    });
    expect(sample.notes).toContain(NO_GPU_TOOL_NOTE);
  });

  it('turns a failed GPU query and unreadable /proc files into notes, not exceptions', async () => {
    const root = makeTmpDir();
    const gpuProbe: GpuProbe = {
      query: async () => {
        throw new Error('nvidia-smi timed out after 5000 ms');
      },
    };
    const sample = await new TelemetrySampler({ procRoot: root, gpuProbe }).sample();
    expect(sample).toMatchObject({
      cpu_pct: null,
      gpu_pct: null,
      gpu_source: 'nvidia-smi',
      memory_available_mib: null,
      memory_source: 'unavailable',
    });
    expect(sample.notes).toEqual([
      expect.stringContaining(`cannot read ${join(root, 'stat')}`),
      expect.stringContaining(`cannot read ${join(root, 'meminfo')}`),
      'GPU query failed: nvidia-smi timed out after 5000 ms',
    ]);
  });

  it("keeps the GPUs of the last query that answered for the gate's capacity, asks once when none has, and says why it has none", async () => {
    const root = fakeProcRoot(fixture('proc-stat.txt'), fixture('meminfo.txt'));
    let failing = true;
    let queries = 0;
    const gpuProbe: GpuProbe = {
      query: async () => {
        queries += 1;
        if (failing) throw new Error('nvidia-smi timed out after 5000 ms');
        return { gpus: parseNvidiaSmiGpus(fixture('nvidia-smi-gpus-two.csv')), computeApps: [] };
      },
    };
    let clock = 5_000;
    const sampler = new TelemetrySampler({ procRoot: root, gpuProbe, now: () => clock });
    await sampler.sample();
    expect(sampler.knownGpuInventory()).toBeNull();
    expect(await sampler.gpuInventory()).toEqual({ kind: 'none', reason: 'nvidia-smi failed: nvidia-smi timed out after 5000 ms' });
    failing = false;
    const read = await sampler.gpuInventory();
    expect(read).toMatchObject({ kind: 'read', at_ms: 5_000, gpus: parseNvidiaSmiGpus(fixture('nvidia-smi-gpus-two.csv')) });
    failing = true;
    clock = 6_000;
    await sampler.sample();
    const asked = queries;
    expect(await sampler.gpuInventory()).toEqual(read);
    expect(queries).toBe(asked);
    const none = new TelemetrySampler({ procRoot: root, gpuProbe: createNvidiaSmiProbe({ command: join(root, 'no-such-nvidia-smi'), timeoutMs: 1_000 }) });
    expect(await none.gpuInventory()).toEqual({ kind: 'none', reason: 'nvidia-smi is not installed' });
  });

  it('reads the real /proc of this machine', async () => {
    const sampler = new TelemetrySampler({ gpuProbe: null });
    await sampler.sample();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const sample = await sampler.sample();
    expect(sample.memory_available_mib).toBeGreaterThan(0);
    expect(sample.gpu_source).toBe('none');
    expect(sample.cpu_pct).toBeGreaterThanOrEqual(0);
    expect(sample.cpu_pct).toBeLessThanOrEqual(100);
  });
});
