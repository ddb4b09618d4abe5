/**
 * The worker gate's quiet-window rule: after the agent reports idle, stop or end, the run is
 * called ready only once every tracked process has exited and the machine has stayed quiet for
 * a sustained window. Pure: all time comes in as input.
 *
 * Rules:
 * 1. Window start = max(idleSeenAtMs, lastProcessAliveAtMs + 1 when known). Samples at or after
 *    it are eligible (samples are ordered by at_ms, stably). The window is the LAST N eligible
 *    samples, N = samplesNeeded(profile, sampleIntervalSec) = max(1, ceil(idle_sustain_sec / interval)).
 * 2. A tracked process alive now → 'waiting_for_process_exit' (reason "tracked processes still alive").
 * 3. Fewer than N eligible samples → 'waiting_for_quiet_window' ("collecting quiet samples: k of N").
 * 4. The window is quiet when every check holds, at the threshold counting as quiet (<=):
 *    mean CPU <= cpu_idle_threshold_pct; mean GPU <= gpu_idle_avg_threshold_pct;
 *    peak GPU <= gpu_idle_peak_threshold_pct; VRAM delta = max vram_used_mib in the window −
 *    vramBaselineMib <= vram_delta_threshold_mib (a shrinking VRAM use is fine).
 *    Missing figures never hold the gate shut: null CPU samples are left out of the CPU mean, and
 *    a mean over no figures is null and passes; a window with no GPU figure at all has
 *    gpu_present false and null GPU figures (GPU treated as idle); a null baseline or no VRAM
 *    figure gives a null delta, which passes. Means are compared with a 1e-9 tolerance so float
 *    noise at the edge (e.g. a mean of 35.000000000001) still counts as at the threshold.
 * 5. Quiet → 'ready' with no reasons; otherwise 'waiting_for_quiet_window' with one reason per
 *    failing check, figures rounded to 0.1.
 * 6. Not ready and nowMs − idleSeenAtMs >= maxWaitAfterIdleSec·1000 → 'timed_out', keeping the
 *    reasons it was not ready. Ready wins over timed out on the same evaluation.
 * 7. Metrics always describe the current window, even a partial one (raw, unrounded figures).
 *
 * Notice: whenever the verdict is not 'ready' and the window holds samples but none carries a GPU
 * figure, the reasons end with "no GPU telemetry: GPU treated as idle". A ready verdict always has
 * empty reasons.
 */
import type { GateThresholdProfile } from '../contract/workload.ts';
import type { TelemetrySample } from '../contract/gate-names.ts';

export interface WindowSample {
  at_ms: number;
  cpu_pct: number | null;
  gpu_pct: number | null;
  vram_used_mib: number | null;
}

export interface QuietWindowInput {
  /** From resolveWorkloadProfile. */
  profile: GateThresholdProfile;
  /** Seconds between telemetry samples; at least 1. */
  sampleIntervalSec: number;
  /** Chronological telemetry readings. */
  samples: readonly WindowSample[];
  /** VRAM used when the run was dispatched. */
  vramBaselineMib: number | null;
  /** When idle, stop or end was first reported (epoch ms). */
  idleSeenAtMs: number;
  /** Whether any tracked process is alive right now. */
  processesAlive: boolean;
  /** The last scan that saw a tracked process alive (epoch ms). */
  lastProcessAliveAtMs: number | null;
  nowMs: number;
  maxWaitAfterIdleSec: number;
}

export interface QuietWindowMetrics {
  samples_needed: number;
  samples_in_window: number;
  mean_cpu_pct: number | null;
  mean_gpu_pct: number | null;
  peak_gpu_pct: number | null;
  vram_delta_mib: number | null;
  gpu_present: boolean;
  /** Eligibility cutoff: samples at or after this instant may enter the window. */
  window_started_at_ms: number;
}

export type QuietWindowVerdictKind = 'waiting_for_process_exit' | 'waiting_for_quiet_window' | 'ready' | 'timed_out';

export type QuietWindowVerdict = {
  verdict: QuietWindowVerdictKind;
  reasons: string[];
  metrics: QuietWindowMetrics;
};

export const PROCESSES_ALIVE_REASON = 'tracked processes still alive';
export const NO_GPU_TELEMETRY_REASON = 'no GPU telemetry: GPU treated as idle';

/** Tolerance for comparing means against thresholds (float noise only). */
const MEAN_EPSILON = 1e-9;

/** Samples a full quiet window needs: max(1, ceil(idle_sustain_sec / sampleIntervalSec)). */
export function samplesNeeded(profile: GateThresholdProfile, sampleIntervalSec: number): number {
  if (!Number.isFinite(sampleIntervalSec) || sampleIntervalSec < 1) {
    throw new RangeError(`sampleIntervalSec must be a finite number >= 1, got ${sampleIntervalSec}`);
  }
  const sustain = profile.idle_sustain_sec;
  if (!Number.isFinite(sustain)) {
    throw new RangeError(`idle_sustain_sec must be finite, got ${sustain}`);
  }
  // Subtract a hair so a float quotient like 100.00000000000001 does not round up to 101.
  return Math.max(1, Math.ceil(sustain / sampleIntervalSec - 1e-9));
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}

function mean(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

function max(values: readonly number[]): number {
  let out = -Infinity;
  for (const v of values) if (v > out) out = v;
  return out;
}

function present(values: readonly (number | null)[]): number[] {
  return values.filter((v): v is number => v !== null && Number.isFinite(v));
}

export function evaluateQuietWindow(input: QuietWindowInput): QuietWindowVerdict {
  const { profile } = input;
  const needed = samplesNeeded(profile, input.sampleIntervalSec);
  const windowStart =
    input.lastProcessAliveAtMs === null
      ? input.idleSeenAtMs
      : Math.max(input.idleSeenAtMs, input.lastProcessAliveAtMs + 1);

  // Stable sort keeps chronological input as it is and tolerates an out-of-order reading.
  const eligible = input.samples
    .filter((s) => s.at_ms >= windowStart)
    .map((s, i) => ({ s, i }))
    .sort((a, b) => a.s.at_ms - b.s.at_ms || a.i - b.i)
    .map(({ s }) => s);
  const window = eligible.slice(Math.max(0, eligible.length - needed));

  const cpu = present(window.map((s) => s.cpu_pct));
  const gpu = present(window.map((s) => s.gpu_pct));
  const vram = present(window.map((s) => s.vram_used_mib));
  const gpuPresent = gpu.length > 0;
  const meanCpu = mean(cpu);
  const meanGpu = gpuPresent ? mean(gpu) : null;
  const peakGpu = gpuPresent ? max(gpu) : null;
  const vramDelta =
    input.vramBaselineMib === null || vram.length === 0 ? null : max(vram) - input.vramBaselineMib;

  const metrics: QuietWindowMetrics = {
    samples_needed: needed,
    samples_in_window: window.length,
    mean_cpu_pct: meanCpu,
    mean_gpu_pct: meanGpu,
    peak_gpu_pct: peakGpu,
    vram_delta_mib: vramDelta,
    gpu_present: gpuPresent,
    window_started_at_ms: windowStart,
  };

  let verdict: QuietWindowVerdictKind;
  const reasons: string[] = [];
  if (input.processesAlive) {
    verdict = 'waiting_for_process_exit';
    reasons.push(PROCESSES_ALIVE_REASON);
  } else if (window.length < needed) {
    verdict = 'waiting_for_quiet_window';
    reasons.push(`collecting quiet samples: ${window.length} of ${needed}`);
  } else {
    if (meanCpu !== null && meanCpu > profile.cpu_idle_threshold_pct + MEAN_EPSILON) {
      reasons.push(`mean CPU ${round1(meanCpu)}% above threshold ${round1(profile.cpu_idle_threshold_pct)}%`);
    }
    if (meanGpu !== null && meanGpu > profile.gpu_idle_avg_threshold_pct + MEAN_EPSILON) {
      reasons.push(`mean GPU ${round1(meanGpu)}% above threshold ${round1(profile.gpu_idle_avg_threshold_pct)}%`);
    }
    if (peakGpu !== null && peakGpu > profile.gpu_idle_peak_threshold_pct) {
      reasons.push(`peak GPU ${round1(peakGpu)}% above threshold ${round1(profile.gpu_idle_peak_threshold_pct)}%`);
    }
    if (vramDelta !== null && vramDelta > profile.vram_delta_threshold_mib) {
      reasons.push(
        `VRAM ${round1(vramDelta)} MiB above dispatch baseline (threshold ${round1(profile.vram_delta_threshold_mib)} MiB)`,
      );
    }
    verdict = reasons.length === 0 ? 'ready' : 'waiting_for_quiet_window';
  }

  if (verdict === 'ready') return { verdict, reasons: [], metrics };

  if (window.length > 0 && !gpuPresent) reasons.push(NO_GPU_TELEMETRY_REASON);
  if (input.nowMs - input.idleSeenAtMs >= input.maxWaitAfterIdleSec * 1000) verdict = 'timed_out';
  return { verdict, reasons, metrics };
}

/**
 * A telemetry sample as the quiet window sees it. Without a GPU tool the GPU counts as idle (gpu_pct null); but when
 * nvidia-smi exists and its query failed, the GPU state is unknown, so the sample counts as fully busy rather than
 * letting the window close blind.
 */
export function toWindowSample(sample: Pick<TelemetrySample, 'at_ms' | 'cpu_pct' | 'gpu_pct' | 'vram_used_mib' | 'gpu_source'>): WindowSample {
  const gpuUnknown = sample.gpu_source === 'nvidia-smi' && sample.gpu_pct === null;
  return { at_ms: sample.at_ms, cpu_pct: sample.cpu_pct, gpu_pct: gpuUnknown ? 100 : sample.gpu_pct, vram_used_mib: sample.vram_used_mib };
}
