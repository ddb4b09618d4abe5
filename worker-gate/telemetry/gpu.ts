import { execFile } from 'node:child_process';
import {
  parseNvidiaSmiComputeApps,
  parseNvidiaSmiGpus,
  type NvidiaSmiComputeApp,
  type NvidiaSmiGpu,
} from './proc-parsers.ts';

export interface GpuReading {
  gpus: NvidiaSmiGpu[];
  computeApps: NvidiaSmiComputeApp[];
}

export interface GpuProbe {
  /** null when the GPU tool is not installed; throws when it is installed but the query failed. */
  query(): Promise<GpuReading | null>;
}

export interface NvidiaSmiProbeOptions {
  command?: string;
  timeoutMs?: number;
}

// The uuid columns tie each compute process to the GPU it runs on, so a run is judged on its own GPUs.
export const GPU_QUERY = ['--query-gpu=index,utilization.gpu,memory.used,memory.total,uuid', '--format=csv,noheader,nounits'];
export const COMPUTE_APPS_QUERY = ['--query-compute-apps=pid,used_memory,gpu_uuid', '--format=csv,noheader,nounits'];
const DEFAULT_TIMEOUT_MS = 5_000;

class CommandNotFound extends Error {}

export function createNvidiaSmiProbe(options: NvidiaSmiProbeOptions = {}): GpuProbe {
  const command = options.command ?? 'nvidia-smi';
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // Once the tool is known to be missing it stays missing: no spawn per sample on GPU-less machines.
  let missing = false;

  return {
    async query(): Promise<GpuReading | null> {
      if (missing) return null;
      try {
        const [gpuCsv, appsCsv] = await Promise.all([
          runQuery(command, GPU_QUERY, timeoutMs),
          runQuery(command, COMPUTE_APPS_QUERY, timeoutMs),
        ]);
        return { gpus: parseNvidiaSmiGpus(gpuCsv), computeApps: parseNvidiaSmiComputeApps(appsCsv) };
      } catch (error) {
        if (error instanceof CommandNotFound) {
          missing = true;
          return null;
        }
        throw error;
      }
    },
  };
}

function runQuery(command: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: timeoutMs, encoding: 'utf8', windowsHide: true }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      reject(describeFailure(command, args, timeoutMs, error, stdout, stderr));
    });
  });
}

type ExecFailure = Error & { code?: string | number | null; killed?: boolean; signal?: NodeJS.Signals | null };

function describeFailure(
  command: string,
  args: string[],
  timeoutMs: number,
  error: ExecFailure,
  stdout: string,
  stderr: string,
): Error {
  if (error.code === 'ENOENT') return new CommandNotFound(`${command} not found`);
  const query = args[0] ?? '';
  if (error.killed && error.signal) return new Error(`${command} ${query} timed out after ${timeoutMs} ms`);
  const output = (stderr.trim() || stdout.trim()).split('\n')[0] ?? '';
  const status = typeof error.code === 'number' ? `exited with status ${error.code}` : error.signal ? `died of ${error.signal}` : error.message;
  return new Error(`${command} ${query} failed: ${status}${output ? `: ${output}` : ''}`);
}
