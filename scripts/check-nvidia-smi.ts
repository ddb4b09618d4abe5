/**
 * Checks the worker gate's GPU telemetry against a real nvidia-smi, on a machine with an NVIDIA GPU
 * (docs/worker-gate.md#checking-the-gpu-telemetry-on-a-real-gpu). The tests run on machines without one, against a
 * stand-in that prints what this script shows the real tool printing; this is where the two are compared.
 *
 *   npm run check:gpu [-- --gpu INDEX] [--mib N] [--save DIR]
 *
 * It asks nvidia-smi exactly what the gate asks, parses it with the gate's parsers, and checks:
 *   1. every GPU parses, and agrees with the tool's own XML report (uuid, total memory);
 *   2. a process of ours holding N MiB on GPU INDEX shows up in the compute processes, on that GPU's uuid, with at
 *      least its N MiB, and leaves them once it ends;
 *   3. the gate's per-run accounting counts that process's memory and its GPU's utilisation for a run that owns it,
 *      and nothing for a run that does not.
 * It prints each check and the raw answers; --save DIR writes the raw answers there too. Exit status 0 when all pass.
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { COMPUTE_APPS_QUERY, createNvidiaSmiProbe, GPU_QUERY, type GpuReading } from '../worker-gate/telemetry/gpu.ts';
import { runGpuUse } from '../worker-gate/domain/run-machine-share.ts';
import { startGpuHolder } from './gpu-holder.ts';

const { values } = parseArgs({
  options: { gpu: { type: 'string', default: '0' }, mib: { type: 'string', default: '1024' }, save: { type: 'string' } },
});
const gpuIndex = Number(values.gpu);
const holderMib = Number(values.mib);
if (!Number.isInteger(gpuIndex) || gpuIndex < 0) throw new Error(`--gpu must be a GPU index (got ${values.gpu})`);
if (!Number.isInteger(holderMib) || holderMib < 1) throw new Error(`--mib must be a whole number of MiB (got ${values.mib})`);

const run = promisify(execFile);
const probe = createNvidiaSmiProbe();
const raw: Record<string, string> = {};
let failures = 0;

function report(ok: boolean, what: string, detail = ''): void {
  if (!ok) failures += 1;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? `: ${detail}` : ''}`);
}

async function nvidiaSmi(args: string[]): Promise<string> {
  return (await run('nvidia-smi', args, { encoding: 'utf8', timeout: 15_000, maxBuffer: 16 * 1024 * 1024 })).stdout;
}

async function timedRead(): Promise<{ reading: GpuReading; ms: number }> {
  const started = performance.now();
  const reading = await probe.query();
  if (!reading) throw new Error('nvidia-smi is not on the PATH: this check needs a machine with an NVIDIA GPU and its driver');
  return { reading, ms: performance.now() - started };
}

async function until<T>(timeoutMs: number, read: () => Promise<T | undefined>): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** Per GPU of the XML report: its uuid and its total framebuffer memory in MiB. */
function xmlGpus(xml: string): { uuid: string; totalMib: number }[] {
  return [...xml.matchAll(/<gpu id="[^"]*">([\s\S]*?)<\/gpu>/g)].map(([, body]) => ({
    uuid: /<uuid>([^<]+)<\/uuid>/.exec(body!)?.[1] ?? '',
    totalMib: Number(/<fb_memory_usage>\s*<total>(\d+) MiB<\/total>/.exec(body!)?.[1] ?? NaN),
  }));
}

console.log(`nvidia-smi ${(await nvidiaSmi(['--version'])).split('\n').filter(Boolean).join('; ')}`);
raw['gpus.csv'] = await nvidiaSmi(GPU_QUERY);
raw['compute-apps-before.csv'] = await nvidiaSmi(COMPUTE_APPS_QUERY);

// 1. Every GPU parses and agrees with the XML report.
const first = await timedRead();
const gpus = first.reading.gpus;
report(gpus.length > 0, 'the GPU query parses', `${gpus.length} GPU(s), one query pair in ${first.ms.toFixed(0)} ms`);
for (const gpu of gpus) {
  const complete = gpu.uuid !== null && gpu.memory_total_mib !== null && gpu.memory_total_mib > 0 && gpu.memory_used_mib !== null;
  report(complete, `GPU ${gpu.index} has every figure the gate reads`, JSON.stringify(gpu));
}
const xml = await nvidiaSmi(['-q', '-x']);
const fromXml = xmlGpus(xml);
report(fromXml.length === gpus.length, 'the XML report lists the same number of GPUs', `${fromXml.length}`);
for (const gpu of gpus) {
  const twin = fromXml.find((entry) => entry.uuid === gpu.uuid);
  report(twin?.totalMib === gpu.memory_total_mib, `GPU ${gpu.index}'s total memory agrees with the XML report`, `${gpu.memory_total_mib} vs ${twin?.totalMib}`);
}

// 2. and 3. A compute process of known pid, GPU and size.
const target = gpus.find((gpu) => gpu.index === gpuIndex);
if (!target?.uuid) {
  report(false, `GPU ${gpuIndex} exists`, `the machine has GPU(s) ${gpus.map((gpu) => gpu.index).join(', ')}`);
} else {
  const holder = await startGpuHolder(target.uuid, holderMib);
  try {
    const seen = await until(30_000, async () => {
      const { reading } = await timedRead();
      const app = reading.computeApps.find((entry) => entry.pid === holder.pid);
      return app ? { reading, app } : undefined;
    });
    raw['compute-apps-holding.csv'] = await nvidiaSmi(COMPUTE_APPS_QUERY);
    report(seen !== undefined, `the compute processes list our process (pid ${holder.pid})`, seen ? JSON.stringify(seen.app) : `they list ${raw['compute-apps-holding.csv'].trim() || 'none'}`);
    if (seen) {
      report(seen.app.gpu_uuid === target.uuid, `on GPU ${gpuIndex}'s uuid`, `${seen.app.gpu_uuid}`);
      report((seen.app.used_memory_mib ?? 0) >= holderMib, `with at least its ${holderMib} MiB`, `${seen.app.used_memory_mib} MiB`);
      const busy = await until(15_000, async () => {
        const { reading } = await timedRead();
        const use = runGpuUse({ kind: 'read', reading }, new Set([holder.pid]));
        return (use.gpu_pct ?? 0) > 0 ? { reading, use } : undefined;
      });
      raw['gpus-holding.csv'] = await nvidiaSmi(GPU_QUERY);
      report(busy !== undefined, "a run that owns the process is charged its GPU's utilisation", busy ? `${busy.use.gpu_pct} %` : 'the GPU read 0 % throughout');
      const owned = runGpuUse({ kind: 'read', reading: (busy ?? seen).reading }, new Set([holder.pid]));
      report((owned.vram_used_mib ?? 0) >= holderMib, 'and its memory', `${owned.vram_used_mib} MiB`);
      const other = runGpuUse({ kind: 'read', reading: (busy ?? seen).reading }, new Set([process.pid]));
      report(other.gpu_pct === 0 && other.vram_used_mib === 0, 'a run that does not own it is charged nothing', JSON.stringify(other));
    }
  } finally {
    await holder.stop();
  }
  const gone = await until(15_000, async () => {
    const { reading } = await timedRead();
    return reading.computeApps.some((entry) => entry.pid === holder.pid) ? undefined : true;
  });
  report(gone === true, 'our process leaves the compute processes once it ends');
}

for (const [name, text] of Object.entries(raw)) console.log(`--- ${name}\n${text.trimEnd() || '(empty)'}`);
if (values.save) {
  await mkdir(values.save, { recursive: true });
  for (const [name, text] of Object.entries({ ...raw, 'query.xml': xml })) await writeFile(join(values.save, name), text);
}
console.log(failures === 0 ? 'all checks passed' : `${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
