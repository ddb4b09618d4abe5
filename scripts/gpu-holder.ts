import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/**
 * A process that holds GPU memory and keeps the GPU busy, so the nvidia-smi check (scripts/check-nvidia-smi.ts) has a
 * compute process of known pid, GPU and size to find. It needs nothing but the driver: Python's ctypes calls the CUDA
 * driver library (libcuda.so.1) that every machine where nvidia-smi works has, so no CUDA toolkit nor framework is
 * required. It allocates `mib` MiB on the first visible GPU, prints "ready", then fills the allocation again and again
 * (device-side memsets, which show as utilisation) until it is killed.
 */
const HOLDER_SOURCE = String.raw`
import ctypes, sys
cuda = ctypes.CDLL('libcuda.so.1')
cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
cuda.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
def check(result, call):
    if result != 0:
        sys.stderr.write('%s failed: CUresult %d\n' % (call, result))
        sys.exit(3)
check(cuda.cuInit(0), 'cuInit')
device = ctypes.c_int()
check(cuda.cuDeviceGet(ctypes.byref(device), 0), 'cuDeviceGet')
context = ctypes.c_void_p()
check(cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device), 'cuCtxCreate')
size = int(sys.argv[1]) * 1024 * 1024
pointer = ctypes.c_uint64()
check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), size), 'cuMemAlloc')
print('ready', flush=True)
while True:
    check(cuda.cuMemsetD8_v2(pointer.value, 1, size), 'cuMemsetD8')
    check(cuda.cuCtxSynchronize(), 'cuCtxSynchronize')
`;

export interface GpuHolder {
  pid: number;
  stop(): Promise<void>;
}

/** Starts a holder on the GPU with this uuid; resolves once it holds its memory, rejects with its error otherwise. */
export async function startGpuHolder(gpuUuid: string, mib: number, readyTimeoutMs = 60_000): Promise<GpuHolder> {
  const child = spawn('python3', ['-c', HOLDER_SOURCE, String(mib)], {
    env: { ...process.env, CUDA_VISIBLE_DEVICES: gpuUuid },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the GPU holder was not ready within ${readyTimeoutMs} ms`)), readyTimeoutMs);
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`could not start python3 for the GPU holder: ${error.message}`));
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the GPU holder ended before it was ready (${signal ?? `status ${code}`}): ${stderr.trim()}`));
    });
  });
  return { pid: child.pid!, stop: () => stopChild(child) };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}
