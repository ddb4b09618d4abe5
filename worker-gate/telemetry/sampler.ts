import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TelemetrySample } from '../contract/gate-names.ts';
import { createNvidiaSmiProbe, type GpuProbe, type GpuReading } from './gpu.ts';
import { cpuPercentBetween, parseMeminfo, parseProcStat, type CpuCounters, type NvidiaSmiGpu } from './proc-parsers.ts';

export interface TelemetrySamplerOptions {
  procRoot?: string;
  /** Defaults to nvidia-smi on the PATH; null samples no GPU at all (gpu_source 'none'). */
  gpuProbe?: GpuProbe | null;
  now?: () => number;
}

/** 'none': no GPU tool or probe (GPU idle); 'failed': the tool exists but its query failed (GPU unknown). */
export type LastGpuReading = { kind: 'none' } | { kind: 'failed' } | { kind: 'read'; reading: GpuReading };

/** The machine's GPUs as the last nvidia-smi query that answered listed them, or why the gate knows none. */
export type GpuInventory = { kind: 'read'; at_ms: number; gpus: NvidiaSmiGpu[] } | { kind: 'none'; reason: string };

type GpuFigures = Pick<TelemetrySample, 'gpu_pct' | 'vram_used_mib' | 'gpu_compute_pids' | 'gpu_count' | 'gpu_source'>;
type MemoryFigures = Pick<TelemetrySample, 'memory_available_mib' | 'memory_source'>;

export const NO_GPU_TOOL_NOTE = 'nvidia-smi not found: GPU figures are null and treated as idle';
export const NO_GPU_PROBE_NOTE = 'no GPU probe configured: GPU figures are null and treated as idle';
export const FIRST_CPU_READING_NOTE = 'first CPU reading: cpu_pct needs a previous sample';

function noGpuFigures(source: TelemetrySample['gpu_source']): GpuFigures {
  return { gpu_pct: null, vram_used_mib: null, gpu_compute_pids: [], gpu_count: 0, gpu_source: source };
}

/** Reads whole-machine CPU, memory and GPU figures; keeps the last /proc/stat counters to compute CPU use. */
export class TelemetrySampler {
  readonly #procRoot: string;
  readonly #gpuProbe: GpuProbe | null;
  readonly #now: () => number;
  #previousCpu: CpuCounters | null = null;
  #lastGpu: LastGpuReading = { kind: 'none' };
  /** The last answer that listed the GPUs; a query failing since leaves it as it was. */
  #inventory: GpuInventory | null = null;

  constructor(options: TelemetrySamplerOptions = {}) {
    this.#procRoot = options.procRoot ?? '/proc';
    this.#gpuProbe = options.gpuProbe === undefined ? createNvidiaSmiProbe() : options.gpuProbe;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Reads the CPU counters without taking a sample, so the next `sample()` can report `cpu_pct` (a percentage
   * needs two readings). True when the counters could be read.
   */
  primeCpu(): boolean {
    const text = this.#readProcFile('stat', []);
    const stat = text === null ? null : parseProcStat(text);
    if (stat) this.#previousCpu = stat.cpu;
    return stat !== null;
  }

  async sample(): Promise<TelemetrySample> {
    const at_ms = this.#now();
    const notes: string[] = [];
    const cpu_pct = this.#sampleCpu(notes);
    const memory = this.#sampleMemory(notes);
    const gpu = await this.#sampleGpu(notes);
    return { at_ms, cpu_pct, ...gpu, ...memory, notes };
  }

  #sampleCpu(notes: string[]): number | null {
    const text = this.#readProcFile('stat', notes);
    if (text === null) return null;
    const stat = parseProcStat(text);
    if (!stat) {
      notes.push(`${join(this.#procRoot, 'stat')} has no aggregate cpu line: cpu_pct is null`);
      return null;
    }
    const previous = this.#previousCpu;
    this.#previousCpu = stat.cpu;
    if (!previous) {
      notes.push(FIRST_CPU_READING_NOTE);
      return null;
    }
    const pct = cpuPercentBetween(previous, stat.cpu);
    if (pct === null) notes.push('no CPU time elapsed since the previous sample: cpu_pct is null');
    return pct;
  }

  #sampleMemory(notes: string[]): MemoryFigures {
    const text = this.#readProcFile('meminfo', notes);
    const memory = text === null ? null : parseMeminfo(text);
    if (memory) return memory;
    if (text !== null) notes.push(`${join(this.#procRoot, 'meminfo')} has no usable fields: memory_available_mib is null`);
    return { memory_available_mib: null, memory_source: 'unavailable' };
  }

  /** The GPU query behind the last sample, per process and per GPU, for judging each run on its own GPU use. */
  lastGpuReading(): LastGpuReading {
    return this.#lastGpu;
  }

  /**
   * The machine's GPUs (docs/worker-gate.md#slots-and-gpus): those of the last query that answered, or of one asked
   * now when no sample has had an answer yet.
   */
  /** The GPUs as the last query that answered listed them; null while none has. */
  knownGpuInventory(): GpuInventory | null {
    return this.#inventory;
  }

  async gpuInventory(): Promise<GpuInventory> {
    if (this.#inventory) return this.#inventory;
    let failure: string;
    try {
      const reading = this.#gpuProbe ? await this.#gpuProbe.query() : null;
      this.#noteInventory(reading);
      if (this.#inventory) return this.#inventory;
      failure = 'no GPU query answered';
    } catch (error) {
      failure = `nvidia-smi failed: ${error instanceof Error ? error.message : String(error)}`;
    }
    return { kind: 'none', reason: failure };
  }

  #noteInventory(reading: GpuReading | null): void {
    if (!this.#gpuProbe) this.#inventory = { kind: 'none', reason: 'no GPU probe is configured' };
    else if (!reading) this.#inventory = { kind: 'none', reason: 'nvidia-smi is not installed' };
    else this.#inventory = { kind: 'read', at_ms: this.#now(), gpus: reading.gpus };
  }

  async #sampleGpu(notes: string[]): Promise<GpuFigures> {
    this.#lastGpu = { kind: 'none' };
    if (!this.#gpuProbe) {
      notes.push(NO_GPU_PROBE_NOTE);
      this.#noteInventory(null);
      return noGpuFigures('none');
    }
    let reading: GpuReading | null;
    try {
      reading = await this.#gpuProbe.query();
    } catch (error) {
      // The tool exists but failed: figures are unknown, not idle, so the source stays 'nvidia-smi'.
      notes.push(`GPU query failed: ${error instanceof Error ? error.message : String(error)}`);
      this.#lastGpu = { kind: 'failed' };
      return noGpuFigures('nvidia-smi');
    }
    this.#noteInventory(reading);
    if (!reading) {
      notes.push(NO_GPU_TOOL_NOTE);
      return noGpuFigures('none');
    }
    this.#lastGpu = { kind: 'read', reading };
    if (reading.gpus.length === 0) notes.push('nvidia-smi reported no GPUs');
    return summariseGpus(reading);
  }

  #readProcFile(name: string, notes: string[]): string | null {
    const path = join(this.#procRoot, name);
    try {
      return readFileSync(path, 'utf8');
    } catch (error) {
      notes.push(`cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`);
      return null;
    }
  }
}

export function summariseGpus(reading: GpuReading): GpuFigures {
  const utilisations = reading.gpus.map((gpu) => gpu.utilization_pct).filter((value) => value !== null);
  const memoryUsed = reading.gpus.map((gpu) => gpu.memory_used_mib).filter((value) => value !== null);
  const pids = [...new Set(reading.computeApps.map((app) => app.pid))].sort((a, b) => a - b);
  return {
    gpu_pct: utilisations.length > 0 ? Math.max(...utilisations) : null,
    vram_used_mib: memoryUsed.length > 0 ? memoryUsed.reduce((sum, value) => sum + value, 0) : null,
    gpu_compute_pids: pids,
    gpu_count: reading.gpus.length,
    gpu_source: 'nvidia-smi',
  };
}
