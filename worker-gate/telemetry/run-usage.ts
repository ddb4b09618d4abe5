import type { WindowSample } from '../domain/quiet-window.ts';
import { runCpuPercent, runWindowSample, type RunCpuReading, type RunCpuUsage, type RunGpuIndices, type RunGpuReading } from '../domain/run-machine-share.ts';

/**
 * Keeps, per watched run, its last CPU reading and its recent quiet-window samples of its own use (worker-gate/domain/run-machine-share.ts),
 * so the gate judges each run's window on the run alone.
 */
export class RunUsageMeter {
  readonly #keep: number;
  readonly #previous = new Map<string, RunCpuReading>();
  readonly #samples = new Map<string, WindowSample[]>();

  /** `keep`: the most samples held per run (the longest window plus a margin). */
  constructor(keep: number) {
    this.#keep = keep;
  }

  /** Takes one sample of the run: its CPU since its previous reading and its GPU use now (on its own GPUs where it was given some). */
  record(runId: string, at_ms: number, usage: RunCpuUsage, gpu: RunGpuReading, pids: readonly number[], gpuIndices: RunGpuIndices = null): WindowSample {
    const current: RunCpuReading = { at_ms, usage };
    const cpuPct = runCpuPercent(this.#previous.get(runId) ?? null, current);
    this.#previous.set(runId, current);
    const sample = runWindowSample(at_ms, cpuPct, gpu, new Set(pids), gpuIndices);
    const samples = this.#samples.get(runId) ?? [];
    samples.push(sample);
    if (samples.length > this.#keep) samples.splice(0, samples.length - this.#keep);
    this.#samples.set(runId, samples);
    return sample;
  }

  samples(runId: string): readonly WindowSample[] {
    return this.#samples.get(runId) ?? [];
  }

  /** Drops what is held for runs the gate no longer watches. */
  keepOnly(runIds: ReadonlySet<string>): void {
    for (const runId of this.#samples.keys()) {
      if (!runIds.has(runId)) {
        this.#samples.delete(runId);
        this.#previous.delete(runId);
      }
    }
  }
}

/** Counters of the run's live processes, keyed so that a reused pid counts as another process. */
export function processCpuUsage(alive: readonly { pid: number; startTicks: number; cpuTicks?: number | undefined }[], ticksPerSec: number): RunCpuUsage {
  return { kind: 'processes', ticks: new Map(alive.map((proc) => [`${proc.pid}:${proc.startTicks}`, proc.cpuTicks ?? 0])), ticksPerSec };
}
