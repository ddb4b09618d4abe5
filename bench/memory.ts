/**
 * Memory benchmark: resident set size of the service at idle and under load, for `npm start`'s embedded defaults
 * (both roles, PGlite, embedded Temporal) and for the control plane alone on the `pg` backend. The Temporal dev server
 * the service starts is a separate process and is reported beside it. Targets: <= 350 MiB idle on the embedded
 * defaults, <= 150 MiB idle on `pg` (the service process, without the Temporal server).
 *   npm run bench:memory       (BENCH_IDLE_SEC=20, BENCH_DURATION_SEC=10, BENCH_CONNECTIONS=10 by default;
 *                               BENCH_SHAPE=embedded or pg for one shape; BENCH_QUICK=1: seconds, bench/knobs.ts)
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpLoad } from './figures.ts';
import { knob, QUICK } from './knobs.ts';
import { freePort } from '../platform/temporal/temporal-dev-server.ts';
import { firstRunConfig } from '../platform/config/first-run.ts';
import { dropDatabase, ensureDatabase, percentileTable } from './support.ts';
import { rssKib, START_ARGS, waitForBanner, writePgControlPlaneConfig } from './support/service-process.ts';

const IDLE_SEC = knob('BENCH_IDLE_SEC', 20, 2);
const DURATION_SEC = knob('BENCH_DURATION_SEC', 10, 1);
const CONNECTIONS = knob('BENCH_CONNECTIONS', 10, 4);
const DATABASE = QUICK ? `rcp_bench_memory_quick_${process.pid}` : 'rcp_bench_memory';
const TOKEN = 'bench-memory-token-0123456789abcdef';


const mib = (kib: number) => Math.round(kib / 1024);


/** Direct children of `pid` whose command line contains `marker`. */
function childPids(pid: number, marker: string): number[] {
  const text = (() => {
    try {
      return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8');
    } catch {
      return '';
    }
  })();
  return text
    .split(/\s+/)
    .filter(Boolean)
    .map(Number)
    .filter((child) => {
      try {
        return readFileSync(`/proc/${child}/cmdline`, 'utf8').includes(marker);
      } catch {
        return false;
      }
    });
}

interface Shape {
  name: string;
  /** Writes what the shape needs into `dir`; returns the environment of the service. */
  prepare(dir: string): Promise<Record<string, string>>;
}

const embeddedDefaults: Shape = {
  name: 'embedded defaults (both roles, PGlite, embedded Temporal)',
  // No SVC_CONFIG: the service reads state/config.json in the working directory, as `npm start` does. It is the
  // first-run config, written here on ports picked now, since the first run's fixed 8787 and 8233 may be in use
  // (another run of the suite, a developer's own npm start).
  async prepare(dir) {
    const port = await freePort();
    mkdirSync(join(dir, 'state'), { mode: 0o700 });
    const config = {
      ...firstRunConfig(),
      listen_port: port,
      completion_callback_url: `http://127.0.0.1:${port}/control/api/worker-callback`,
      worker_wake_gate_url: `http://127.0.0.1:${port}`,
      temporal_ui_port: await freePort(),
    };
    writeFileSync(join(dir, 'state', 'config.json'), JSON.stringify(config), { mode: 0o600 });
    return {};
  },
};

const pgControlPlane: Shape = {
  name: 'control plane alone, pg backend',
  async prepare(dir) {
    await ensureDatabase(DATABASE);
    const configPath = writePgControlPlaneConfig(dir, { database: DATABASE, token: TOKEN, callbackToken: 'bench-memory-callback-0123456789ab' });
    return { SVC_CONFIG: configPath };
  },
};

async function measure(shape: Shape): Promise<Record<string, string | number>> {
  const dir = mkdtempSync(join(tmpdir(), 'rcp-bench-memory-'));
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn', ...(await shape.prepare(dir)) };
  if (shape === embeddedDefaults) {
    delete env.SVC_CONFIG;
    delete env.SVC_CONTROL_PLANE_CONFIG;
  }
  const child = spawn(process.execPath, START_ARGS, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  try {
    const url = await waitForBanner(child, () => output);
    const token = shape === embeddedDefaults ? (JSON.parse(readFileSync(join(dir, 'state', 'config.json'), 'utf8')) as { control_api_bearer_token: string }).control_api_bearer_token : TOKEN;
    const pid = child.pid!;
    const temporalPid = childPids(pid, 'start-dev')[0];
    await new Promise((resolve) => setTimeout(resolve, IDLE_SEC * 1000));
    const idle = rssKib(pid);
    const temporalIdle = temporalPid ? rssKib(temporalPid) : 0;

    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, rssKib(pid))), 100);
    const result = await httpLoad(`${url}/control/api/v1/events?page_size=50`, { authorization: `Bearer ${token}` }, DURATION_SEC, CONNECTIONS);
    clearInterval(sampler);
    const after = rssKib(pid);
    return {
      shape: shape.name,
      'idle MiB': mib(idle),
      'load peak MiB': mib(peak),
      'after load MiB': mib(after),
      'req/s': Math.round(result.rps),
      'Temporal dev server idle MiB': temporalPid ? mib(temporalIdle) : 'none',
    };
  } finally {
    child.kill('SIGINT');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

const rows = [];
// BENCH_SHAPE=embedded or BENCH_SHAPE=pg measures one shape alone.
const shapes = { embedded: embeddedDefaults, pg: pgControlPlane };
const only = process.env.BENCH_SHAPE as keyof typeof shapes | undefined;
/** A port picked for the service may be taken before it binds it: the service then exits at once, and is started again. */
async function measureOnFreePorts(shape: Shape): Promise<Record<string, string | number>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await measure(shape);
    } catch (error) {
      if (attempt >= 3 || !/EADDRINUSE|address already in use/i.test((error as Error).message)) throw error;
    }
  }
}

try {
  for (const shape of only ? [shapes[only]] : Object.values(shapes)) {
    console.log(`measuring: ${shape.name} (idle ${IDLE_SEC} s, then ${DURATION_SEC} s of GET /control/api/v1/events at ${CONNECTIONS} connections)`);
    rows.push(await measureOnFreePorts(shape));
  }
} finally {
  if (QUICK) await dropDatabase(DATABASE);
}
console.log(`\nnode ${process.version}\n`);
console.log(percentileTable(rows));
