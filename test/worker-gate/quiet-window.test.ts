import { describe, expect, it } from 'vitest';
import {
  NO_GPU_TELEMETRY_REASON,
  PROCESSES_ALIVE_REASON,
  evaluateQuietWindow,
  samplesNeeded,
  toWindowSample,
} from '../../worker-gate/domain/quiet-window.ts';
import type { QuietWindowInput, QuietWindowVerdict, WindowSample } from '../../worker-gate/domain/quiet-window.ts';
import { resolveWorkloadProfile } from '../../worker-gate/contract/workload.ts';
import type { GateThresholdProfile } from '../../worker-gate/contract/workload.ts';

const IDLE = 1_700_000_000_000;
const INTERVAL_SEC = 10;
const INTERVAL_MS = INTERVAL_SEC * 1000;
const BASELINE = 4000;

/** 30 s sustain at a 10 s interval: a window of 3 samples. */
const PROFILE: GateThresholdProfile = {
  idle_sustain_sec: 30,
  cpu_idle_threshold_pct: 35,
  gpu_idle_avg_threshold_pct: 10,
  gpu_idle_peak_threshold_pct: 20,
  vram_delta_threshold_mib: 1024,
};

/** Samples every INTERVAL_MS from `start`; unspecified figures are quiet. */
function series(points: readonly Partial<WindowSample>[], start = IDLE): WindowSample[] {
  return points.map((p, i) => ({
    at_ms: start + i * INTERVAL_MS,
    cpu_pct: 5,
    gpu_pct: 0,
    vram_used_mib: BASELINE,
    ...p,
  }));
}

function quiet(n: number, start = IDLE): WindowSample[] {
  return series(Array.from({ length: n }, () => ({})), start);
}

function input(overrides: Partial<QuietWindowInput> = {}): QuietWindowInput {
  const samples = overrides.samples ?? quiet(3);
  const last = samples[samples.length - 1];
  return {
    profile: PROFILE,
    sampleIntervalSec: INTERVAL_SEC,
    samples,
    vramBaselineMib: BASELINE,
    idleSeenAtMs: IDLE,
    processesAlive: false,
    lastProcessAliveAtMs: null,
    nowMs: last ? last.at_ms : IDLE,
    maxWaitAfterIdleSec: 3600,
    ...overrides,
  };
}

const cpu = (...v: (number | null)[]) => series(v.map((cpu_pct) => ({ cpu_pct })));
const gpu = (...v: (number | null)[]) => series(v.map((gpu_pct) => ({ gpu_pct })));
const vram = (...v: (number | null)[]) => series(v.map((vram_used_mib) => ({ vram_used_mib })));

describe('samplesNeeded', () => {
  it.each([
    { sustain: 180, interval: 5, expected: 36 },
    { sustain: 30, interval: 10, expected: 3 },
    { sustain: 25, interval: 10, expected: 3 },
    { sustain: 31, interval: 10, expected: 4 },
    { sustain: 300, interval: 7, expected: 43 },
    { sustain: 180, interval: 1.8, expected: 100 },
    // 21 / 1.4 is 15.000000000000002 in floating point: still 15 samples.
    { sustain: 21, interval: 1.4, expected: 15 },
    { sustain: 5, interval: 10, expected: 1 },
    { sustain: 0, interval: 5, expected: 1 },
    { sustain: -10, interval: 5, expected: 1 },
  ])('sustain $sustain s at $interval s → $expected samples', ({ sustain, interval, expected }) => {
    expect(samplesNeeded({ ...PROFILE, idle_sustain_sec: sustain }, interval)).toBe(expected);
  });

  it.each([0, 0.5, -1, Number.NaN, Number.POSITIVE_INFINITY])('rejects a sample interval of %s', (interval) => {
    expect(() => samplesNeeded(PROFILE, interval)).toThrow(RangeError);
  });

  it('rejects a non-finite sustain', () => {
    expect(() => samplesNeeded({ ...PROFILE, idle_sustain_sec: Number.NaN }, 5)).toThrow(RangeError);
  });
});

describe('evaluateQuietWindow thresholds (at the threshold counts as quiet)', () => {
  it.each([
    // CPU mean, threshold 35
    { name: 'CPU mean at threshold', samples: cpu(35, 35, 35), verdict: 'ready', reasons: [] },
    { name: 'CPU mean at threshold from mixed figures', samples: cpu(30, 40, 35), verdict: 'ready', reasons: [] },
    { name: 'CPU mean just below', samples: cpu(34.9, 34.9, 34.9), verdict: 'ready', reasons: [] },
    {
      name: 'CPU mean just above',
      samples: cpu(35.1, 35.1, 35.1),
      verdict: 'waiting_for_quiet_window',
      reasons: ['mean CPU 35.1% above threshold 35%'],
    },
    {
      name: 'CPU mean above though each figure is near it',
      samples: cpu(30, 40, 35.3),
      verdict: 'waiting_for_quiet_window',
      reasons: ['mean CPU 35.1% above threshold 35%'],
    },
    {
      name: 'CPU mean well above, rounded to 0.1',
      samples: cpu(42.14, 42.14, 42.14),
      verdict: 'waiting_for_quiet_window',
      reasons: ['mean CPU 42.1% above threshold 35%'],
    },
    // GPU mean, threshold 10 (peak stays within 20)
    { name: 'GPU mean at threshold', samples: gpu(10, 10, 10), verdict: 'ready', reasons: [] },
    { name: 'GPU mean and peak both at threshold', samples: gpu(0, 10, 20), verdict: 'ready', reasons: [] },
    { name: 'GPU mean just below', samples: gpu(9.9, 9.9, 9.9), verdict: 'ready', reasons: [] },
    {
      name: 'GPU mean just above',
      samples: gpu(10.1, 10.1, 10.1),
      verdict: 'waiting_for_quiet_window',
      reasons: ['mean GPU 10.1% above threshold 10%'],
    },
    // GPU peak, threshold 20 (mean stays within 10)
    { name: 'GPU peak at threshold', samples: gpu(0, 0, 20), verdict: 'ready', reasons: [] },
    { name: 'GPU peak just below', samples: gpu(0, 19.9, 0), verdict: 'ready', reasons: [] },
    {
      name: 'GPU peak just above',
      samples: gpu(20.1, 0, 0),
      verdict: 'waiting_for_quiet_window',
      reasons: ['peak GPU 20.1% above threshold 20%'],
    },
    {
      name: 'GPU mean and peak both above',
      samples: gpu(30, 30, 0),
      verdict: 'waiting_for_quiet_window',
      reasons: ['mean GPU 20% above threshold 10%', 'peak GPU 30% above threshold 20%'],
    },
    // VRAM delta = max in window − baseline, threshold 1024
    { name: 'VRAM delta at threshold', samples: vram(BASELINE, BASELINE + 1024, BASELINE), verdict: 'ready', reasons: [] },
    { name: 'VRAM delta just below', samples: vram(BASELINE + 1023, BASELINE, BASELINE), verdict: 'ready', reasons: [] },
    {
      name: 'VRAM delta just above',
      samples: vram(BASELINE, BASELINE, BASELINE + 1025),
      verdict: 'waiting_for_quiet_window',
      reasons: ['VRAM 1025 MiB above dispatch baseline (threshold 1024 MiB)'],
    },
    {
      name: 'VRAM delta uses the peak, not the mean',
      samples: vram(BASELINE, BASELINE + 2048, BASELINE),
      verdict: 'waiting_for_quiet_window',
      reasons: ['VRAM 2048 MiB above dispatch baseline (threshold 1024 MiB)'],
    },
    { name: 'VRAM below baseline (negative delta)', samples: vram(BASELINE - 3000, BASELINE - 3000, BASELINE - 2000), verdict: 'ready', reasons: [] },
    {
      name: 'every check failing at once',
      samples: series([
        { cpu_pct: 90, gpu_pct: 95, vram_used_mib: BASELINE + 5000 },
        { cpu_pct: 90, gpu_pct: 95, vram_used_mib: BASELINE + 5000 },
        { cpu_pct: 90, gpu_pct: 95, vram_used_mib: BASELINE + 5000 },
      ]),
      verdict: 'waiting_for_quiet_window',
      reasons: [
        'mean CPU 90% above threshold 35%',
        'mean GPU 95% above threshold 10%',
        'peak GPU 95% above threshold 20%',
        'VRAM 5000 MiB above dispatch baseline (threshold 1024 MiB)',
      ],
    },
  ])('$name → $verdict', ({ samples, verdict, reasons }) => {
    const result = evaluateQuietWindow(input({ samples }));
    expect(result.verdict).toBe(verdict);
    expect(result.reasons).toEqual(reasons);
  });

  it.each([
    { name: 'no growth', vram: BASELINE, verdict: 'ready', delta: 0, reasons: [] },
    {
      name: 'one MiB of growth',
      vram: BASELINE + 1,
      verdict: 'waiting_for_quiet_window',
      delta: 1,
      reasons: ['VRAM 1 MiB above dispatch baseline (threshold 0 MiB)'],
    },
    { name: 'shrinkage', vram: BASELINE - 500, verdict: 'ready', delta: -500, reasons: [] },
  ])('a VRAM threshold of 0 allows $name → $verdict', ({ vram: used, verdict, delta, reasons }) => {
    const result = evaluateQuietWindow(
      input({ profile: { ...PROFILE, vram_delta_threshold_mib: 0 }, samples: vram(used, used, used) }),
    );
    expect(result.verdict).toBe(verdict);
    expect(result.reasons).toEqual(reasons);
    expect(result.metrics.vram_delta_mib).toBe(delta);
  });

  it.each([
    { name: 'a null baseline', baseline: null, samples: vram(99_999, 99_999, 99_999) },
    { name: 'no VRAM figures', baseline: BASELINE, samples: vram(null, null, null) },
  ])('$name gives a null VRAM delta, which passes', ({ baseline, samples }) => {
    const result = evaluateQuietWindow(
      input({ profile: { ...PROFILE, vram_delta_threshold_mib: 0 }, samples, vramBaselineMib: baseline }),
    );
    expect(result.verdict).toBe('ready');
    expect(result.metrics.vram_delta_mib).toBeNull();
  });

  it('ignores VRAM figures that are null among present ones', () => {
    const result = evaluateQuietWindow(input({ samples: vram(null, BASELINE + 2000, null) }));
    expect(result.metrics.vram_delta_mib).toBe(2000);
    expect(result.verdict).toBe('waiting_for_quiet_window');
  });
});

describe('evaluateQuietWindow missing figures', () => {
  it.each([
    { name: 'some null CPU figures left out of the mean', samples: cpu(null, 10, 20), verdict: 'ready', mean: 15, reasons: [] },
    {
      name: 'null CPU figures are not counted as zero',
      samples: cpu(null, null, 100),
      verdict: 'waiting_for_quiet_window',
      mean: 100,
      reasons: ['mean CPU 100% above threshold 35%'],
    },
    {
      name: 'null CPU figures with the rest above threshold',
      samples: cpu(null, 40, 50),
      verdict: 'waiting_for_quiet_window',
      mean: 45,
      reasons: ['mean CPU 45% above threshold 35%'],
    },
    { name: 'all CPU figures null', samples: cpu(null, null, null), verdict: 'ready', mean: null, reasons: [] },
  ])('$name → $verdict', ({ samples, verdict, mean, reasons }) => {
    const result = evaluateQuietWindow(input({ samples }));
    expect(result.verdict).toBe(verdict);
    expect(result.reasons).toEqual(reasons);
    expect(result.metrics.mean_cpu_pct).toBe(mean);
  });

  it('treats a series with no GPU figures as GPU-idle and ready', () => {
    const result = evaluateQuietWindow(input({ samples: gpu(null, null, null) }));
    expect(result.verdict).toBe('ready');
    expect(result.reasons).toEqual([]);
    expect(result.metrics).toMatchObject({ gpu_present: false, mean_gpu_pct: null, peak_gpu_pct: null });
  });

  it('adds the no-GPU notice after the failing checks when not ready', () => {
    const samples = series([
      { cpu_pct: 80, gpu_pct: null },
      { cpu_pct: 80, gpu_pct: null },
      { cpu_pct: 80, gpu_pct: null },
    ]);
    const result = evaluateQuietWindow(input({ samples }));
    expect(result.verdict).toBe('waiting_for_quiet_window');
    expect(result.reasons).toEqual(['mean CPU 80% above threshold 35%', NO_GPU_TELEMETRY_REASON]);
  });

  it('adds the no-GPU notice to a partial window but not to an empty one', () => {
    const partial = evaluateQuietWindow(input({ samples: gpu(null) }));
    expect(partial.reasons).toEqual(['collecting quiet samples: 1 of 3', NO_GPU_TELEMETRY_REASON]);
    const empty = evaluateQuietWindow(input({ samples: [] }));
    expect(empty.reasons).toEqual(['collecting quiet samples: 0 of 3']);
    expect(empty.metrics.gpu_present).toBe(false);
  });

  it('uses the GPU figures that are present when some are null', () => {
    const result = evaluateQuietWindow(input({ samples: gpu(null, 50, null) }));
    expect(result.metrics).toMatchObject({ gpu_present: true, mean_gpu_pct: 50, peak_gpu_pct: 50 });
    expect(result.reasons).toEqual(['mean GPU 50% above threshold 10%', 'peak GPU 50% above threshold 20%']);
  });
});

describe('evaluateQuietWindow sustain window', () => {
  it.each([
    { name: 'N-1 quiet samples', profile: PROFILE, n: 2, verdict: 'waiting_for_quiet_window', reasons: ['collecting quiet samples: 2 of 3'] },
    { name: 'N quiet samples', profile: PROFILE, n: 3, verdict: 'ready', reasons: [] },
    { name: 'more than N quiet samples', profile: PROFILE, n: 10, verdict: 'ready', reasons: [] },
    {
      name: '25 s sustain at 10 s rounds up: 2 samples',
      profile: { ...PROFILE, idle_sustain_sec: 25 },
      n: 2,
      verdict: 'waiting_for_quiet_window',
      reasons: ['collecting quiet samples: 2 of 3'],
    },
    { name: '25 s sustain at 10 s rounds up: 3 samples', profile: { ...PROFILE, idle_sustain_sec: 25 }, n: 3, verdict: 'ready', reasons: [] },
    { name: 'zero sustain still needs one sample', profile: { ...PROFILE, idle_sustain_sec: 0 }, n: 1, verdict: 'ready', reasons: [] },
    {
      name: 'zero sustain with no sample',
      profile: { ...PROFILE, idle_sustain_sec: 0 },
      n: 0,
      verdict: 'waiting_for_quiet_window',
      reasons: ['collecting quiet samples: 0 of 1'],
    },
  ])('$name → $verdict', ({ profile, n, verdict, reasons }) => {
    const result = evaluateQuietWindow(input({ profile, samples: quiet(n) }));
    expect(result.verdict).toBe(verdict);
    expect(result.reasons).toEqual(reasons);
  });

  it.each([
    { name: 'first sample 1 ms before idle_seen is excluded', start: IDLE - 1, verdict: 'waiting_for_quiet_window', inWindow: 2 },
    { name: 'first sample exactly at idle_seen is included', start: IDLE, verdict: 'ready', inWindow: 3 },
  ])('$name', ({ start, verdict, inWindow }) => {
    const result = evaluateQuietWindow(input({ samples: quiet(3, start), nowMs: start + 3 * INTERVAL_MS }));
    expect(result.verdict).toBe(verdict);
    expect(result.metrics.samples_in_window).toBe(inWindow);
    expect(result.metrics.window_started_at_ms).toBe(IDLE);
  });

  it('excludes busy samples taken before idle_seen', () => {
    const before = series([{ cpu_pct: 100, gpu_pct: 100 }, { cpu_pct: 100, gpu_pct: 100 }], IDLE - 2 * INTERVAL_MS);
    const result = evaluateQuietWindow(input({ samples: [...before, ...quiet(3)] }));
    expect(result.verdict).toBe('ready');
  });

  it.each([
    // Samples at IDLE, +10 s, +20 s, +30 s; a process was last seen alive at `aliveAt`.
    { name: 'a sample at the last alive scan is excluded', aliveAt: IDLE + INTERVAL_MS, verdict: 'waiting_for_quiet_window', inWindow: 2 },
    { name: 'a sample 1 ms after the last alive scan is included', aliveAt: IDLE + INTERVAL_MS - 1, verdict: 'ready', inWindow: 3 },
    { name: 'a last alive scan before idle_seen does not matter', aliveAt: IDLE - 5 * INTERVAL_MS, verdict: 'ready', inWindow: 3 },
  ])('$name', ({ aliveAt, verdict, inWindow }) => {
    const result = evaluateQuietWindow(input({ samples: quiet(4), lastProcessAliveAtMs: aliveAt }));
    expect(result.verdict).toBe(verdict);
    expect(result.metrics.samples_in_window).toBe(inWindow);
    expect(result.metrics.window_started_at_ms).toBe(Math.max(IDLE, aliveAt + 1));
  });

  it('recovers once a busy spike ages out of the sliding window', () => {
    const samples = series([{}, { cpu_pct: 100, gpu_pct: 90, vram_used_mib: BASELINE + 4096 }, {}, {}, {}, {}]);
    const verdicts = [1, 2, 3, 4, 5, 6].map(
      (n) => evaluateQuietWindow(input({ samples: samples.slice(0, n) })).verdict,
    );
    expect(verdicts).toEqual([
      'waiting_for_quiet_window', // 1 of 3
      'waiting_for_quiet_window', // 2 of 3
      'waiting_for_quiet_window', // spike in window
      'waiting_for_quiet_window', // spike in window
      'ready', // spike aged out
      'ready',
    ]);
    const spiking = evaluateQuietWindow(input({ samples: samples.slice(0, 4) }));
    expect(spiking.reasons).toEqual([
      'mean CPU 36.7% above threshold 35%',
      'mean GPU 30% above threshold 10%',
      'peak GPU 90% above threshold 20%',
      'VRAM 4096 MiB above dispatch baseline (threshold 1024 MiB)',
    ]);
  });

  it('fills metrics from a partial window so progress is visible', () => {
    const result = evaluateQuietWindow(
      input({ samples: series([{ cpu_pct: 10, gpu_pct: 4, vram_used_mib: BASELINE + 100 }, { cpu_pct: 20, gpu_pct: 8 }]) }),
    );
    expect(result.verdict).toBe('waiting_for_quiet_window');
    expect(result.metrics).toEqual({
      samples_needed: 3,
      samples_in_window: 2,
      mean_cpu_pct: 15,
      mean_gpu_pct: 6,
      peak_gpu_pct: 8,
      vram_delta_mib: 100,
      gpu_present: true,
      window_started_at_ms: IDLE,
    });
  });
});

describe('evaluateQuietWindow processes and timeout', () => {
  it('waits for process exit while a tracked process is alive, even over a quiet window', () => {
    const result = evaluateQuietWindow(input({ samples: quiet(5), processesAlive: true }));
    expect(result.verdict).toBe('waiting_for_process_exit');
    expect(result.reasons).toEqual([PROCESSES_ALIVE_REASON]);
    expect(result.metrics.samples_in_window).toBe(3);
  });

  const LIMIT_SEC = 600;
  it.each([
    {
      name: 'one ms before the limit, busy',
      now: IDLE + LIMIT_SEC * 1000 - 1,
      samples: cpu(80, 80, 80),
      alive: false,
      verdict: 'waiting_for_quiet_window',
      reasons: ['mean CPU 80% above threshold 35%'],
    },
    {
      name: 'exactly at the limit, busy',
      now: IDLE + LIMIT_SEC * 1000,
      samples: cpu(80, 80, 80),
      alive: false,
      verdict: 'timed_out',
      reasons: ['mean CPU 80% above threshold 35%'],
    },
    {
      name: 'at the limit, still collecting',
      now: IDLE + LIMIT_SEC * 1000,
      samples: quiet(1),
      alive: false,
      verdict: 'timed_out',
      reasons: ['collecting quiet samples: 1 of 3'],
    },
    {
      name: 'one ms before the limit, process alive',
      now: IDLE + LIMIT_SEC * 1000 - 1,
      samples: quiet(3),
      alive: true,
      verdict: 'waiting_for_process_exit',
      reasons: [PROCESSES_ALIVE_REASON],
    },
    {
      name: 'past the limit, process alive',
      now: IDLE + LIMIT_SEC * 1000 + 1,
      samples: quiet(3),
      alive: true,
      verdict: 'timed_out',
      reasons: [PROCESSES_ALIVE_REASON],
    },
    { name: 'at the limit, quiet: ready wins', now: IDLE + LIMIT_SEC * 1000, samples: quiet(3), alive: false, verdict: 'ready', reasons: [] },
    { name: 'far past the limit, quiet: ready wins', now: IDLE + 10 * LIMIT_SEC * 1000, samples: quiet(3), alive: false, verdict: 'ready', reasons: [] },
  ])('$name → $verdict', ({ now, samples, alive, verdict, reasons }) => {
    const result = evaluateQuietWindow(
      input({ samples, nowMs: now, processesAlive: alive, maxWaitAfterIdleSec: LIMIT_SEC }),
    );
    expect(result.verdict).toBe(verdict);
    expect(result.reasons).toEqual(reasons);
  });
});

describe('evaluateQuietWindow workload profiles', () => {
  const GLOBAL: GateThresholdProfile = {
    idle_sustain_sec: 180,
    cpu_idle_threshold_pct: 35,
    gpu_idle_avg_threshold_pct: 10,
    gpu_idle_peak_threshold_pct: 20,
    vram_delta_threshold_mib: 1024,
  };
  const training = resolveWorkloadProfile('training', GLOBAL);
  const inference = resolveWorkloadProfile('inference_eval', GLOBAL);
  const interval = 5;
  const moderate = (n: number): WindowSample[] =>
    Array.from({ length: n }, (_, i) => ({
      at_ms: IDLE + i * interval * 1000,
      cpu_pct: 25,
      gpu_pct: i % 2 === 0 ? 4 : 10,
      vram_used_mib: BASELINE + 600,
    }));

  it.each([
    { cls: 'training', profile: training, n: 60, verdict: 'ready', reasons: [] },
    {
      cls: 'inference_eval',
      profile: inference,
      n: 60,
      verdict: 'waiting_for_quiet_window',
      reasons: [
        'mean CPU 25% above threshold 20%',
        'mean GPU 7% above threshold 5%',
        'VRAM 600 MiB above dispatch baseline (threshold 512 MiB)',
      ],
    },
    { cls: 'training', profile: training, n: 40, verdict: 'ready', reasons: [] },
    {
      cls: 'inference_eval',
      profile: inference,
      n: 40,
      verdict: 'waiting_for_quiet_window',
      reasons: ['collecting quiet samples: 40 of 60'],
    },
  ])('$n samples of moderate load under $cls → $verdict', ({ profile, n, verdict, reasons }) => {
    const result = evaluateQuietWindow(
      input({ profile, sampleIntervalSec: interval, samples: moderate(n), nowMs: IDLE + n * interval * 1000 }),
    );
    expect(result.verdict).toBe(verdict);
    expect(result.reasons).toEqual(reasons);
  });

  it('sizes the window from each profile', () => {
    expect(samplesNeeded(training, interval)).toBe(36);
    expect(samplesNeeded(inference, interval)).toBe(60);
  });
});

describe('evaluateQuietWindow properties', () => {
  /** mulberry32: a small seeded generator so every run checks the same cases. */
  function rng(seed: number): () => number {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function randomInput(rand: () => number): QuietWindowInput {
    const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
    const maybe = <T,>(p: number, v: T): T | null => (rand() < p ? null : v);
    const interval = int(1, 10);
    const profile: GateThresholdProfile = {
      idle_sustain_sec: int(0, 6) * interval + int(0, interval - 1),
      cpu_idle_threshold_pct: int(10, 50),
      gpu_idle_avg_threshold_pct: int(5, 30),
      gpu_idle_peak_threshold_pct: int(10, 60),
      vram_delta_threshold_mib: int(0, 2048),
    };
    const quietish = rand() < 0.5;
    const count = int(0, 14);
    const first = IDLE - int(0, 4) * interval * 1000;
    const samples: WindowSample[] = Array.from({ length: count }, (_, i) => ({
      at_ms: first + i * interval * 1000 + int(0, 999),
      cpu_pct: maybe(0.15, quietish ? int(0, 30) : int(0, 100)),
      gpu_pct: rand() < 0.2 ? null : maybe(0.1, quietish ? int(0, 8) : int(0, 100)),
      vram_used_mib: maybe(0.1, BASELINE + (quietish ? int(-500, 500) : int(-500, 4000))),
    }));
    const lastAt = samples[samples.length - 1]?.at_ms ?? IDLE;
    return {
      profile,
      sampleIntervalSec: interval,
      samples,
      vramBaselineMib: maybe(0.15, BASELINE),
      idleSeenAtMs: IDLE,
      processesAlive: rand() < 0.15,
      lastProcessAliveAtMs: rand() < 0.6 ? null : IDLE + int(-3, 3) * interval * 1000,
      nowMs: Math.max(IDLE, lastAt) + int(0, 120) * 1000,
      maxWaitAfterIdleSec: int(30, 240),
    };
  }

  const busy = (at_ms: number): WindowSample => ({ at_ms, cpu_pct: 100, gpu_pct: 100, vram_used_mib: BASELINE + 1_000_000 });
  const CASES = 600;

  it('is deterministic and never changed by an older, busier sample outside the window', () => {
    const rand = rng(0x5eed);
    const seen: Record<QuietWindowVerdict['verdict'], number> = {
      ready: 0,
      waiting_for_process_exit: 0,
      waiting_for_quiet_window: 0,
      timed_out: 0,
    };
    let eligibleOutsideChecked = 0;
    for (let c = 0; c < CASES; c++) {
      const base = randomInput(rand);
      const snapshot = structuredClone(base);
      const first = evaluateQuietWindow(base);
      const second = evaluateQuietWindow(base);
      expect(second, `case ${c}`).toEqual(first);
      expect(base, `case ${c}: input untouched`).toEqual(snapshot);
      seen[first.verdict]++;

      // Older than the window start: never eligible.
      const start = first.metrics.window_started_at_ms;
      const beforeStart = busy(Math.min(start, base.samples[0]?.at_ms ?? start) - 1 - Math.floor(rand() * 60_000));
      const withBefore = evaluateQuietWindow({ ...base, samples: [beforeStart, ...base.samples] });
      expect(withBefore, `case ${c}: busy sample before window start`).toEqual(first);

      // Eligible but older than the last N eligible samples: outside the window once it is full.
      const eligible = base.samples.filter((s) => s.at_ms >= start);
      const needed = first.metrics.samples_needed;
      const oldestInWindow = eligible[eligible.length - needed];
      if (eligible.length >= needed && oldestInWindow) {
        const at = start + Math.floor(rand() * (oldestInWindow.at_ms - start + 1));
        const index = base.samples.findIndex((s) => s.at_ms >= at);
        const samples = [...base.samples];
        samples.splice(index, 0, busy(at));
        const withOlder = evaluateQuietWindow({ ...base, samples });
        expect(withOlder, `case ${c}: busy eligible sample older than the window`).toEqual(first);
        eligibleOutsideChecked++;
      }
    }
    // The generator must actually reach every verdict, or the property proves little.
    expect(seen.ready).toBeGreaterThan(20);
    expect(seen.waiting_for_quiet_window).toBeGreaterThan(20);
    expect(seen.waiting_for_process_exit).toBeGreaterThan(5);
    expect(seen.timed_out).toBeGreaterThan(5);
    expect(eligibleOutsideChecked).toBeGreaterThan(50);
  });

  it('does change the verdict when the busy sample lands inside the window (the check can fail)', () => {
    const samples = quiet(3);
    const before = evaluateQuietWindow(input({ samples }));
    const after = evaluateQuietWindow(input({ samples: [...samples, busy(IDLE + 3 * INTERVAL_MS)] }));
    expect(before.verdict).toBe('ready');
    expect(after.verdict).toBe('waiting_for_quiet_window');
  });
});

describe('toWindowSample', () => {
  it('keeps the figures of a sample with or without a GPU tool, and counts a failed GPU query as fully busy', () => {
    const base = { at_ms: 5, cpu_pct: 12, vram_used_mib: null };
    expect(toWindowSample({ ...base, gpu_pct: null, gpu_source: 'none' })).toEqual({ ...base, gpu_pct: null });
    expect(toWindowSample({ ...base, gpu_pct: 7, gpu_source: 'nvidia-smi' })).toEqual({ ...base, gpu_pct: 7 });
    expect(toWindowSample({ ...base, gpu_pct: null, gpu_source: 'nvidia-smi' })).toEqual({ ...base, gpu_pct: 100 });
  });
});
