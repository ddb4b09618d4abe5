import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { clusterNetwork, LOCAL_CLUSTER_NAMING } from '../../scripts/cluster/topology.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';

// expected duration: ~110 s (`npm run cluster` started three times, with one worker host each)

/**
 * `npm run cluster` as a person runs it, in a process group of its own as a terminal makes one: Ctrl-C twice (the
 * second while it stops), SIGTERM and a closed terminal (SIGHUP), each sent to the whole group as the terminal or a
 * service manager sends it. Each time nothing may be left: no process of the cluster, no network namespace, no bridge.
 * While it runs, an item without machine_target is routed to the first worker host's own lane (no extra default lane).
 */
const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLUSTER_DIR = join(REPO_ROOT, 'state', 'cluster');
const network = clusterNetwork(LOCAL_CLUSTER_NAMING);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Started {
  child: ChildProcess;
  output: () => string;
}

const groups: number[] = [];
afterAll(() => {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // Gone.
    }
  }
});

function startCluster(): Started {
  const child = spawn('npm', ['run', 'cluster'], { cwd: REPO_ROOT, env: { ...process.env, RCP_CLUSTER_GATES: '1' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  groups.push(child.pid!);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

async function waitFor(what: string, started: Started, pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = pattern.exec(started.output());
    if (match) return match;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs / 1000} s:\n${started.output()}`);
    await sleep(100);
  }
}

/** Pids whose command line or environment names the cluster's folder (the cluster's own test, scripts/cluster). */
function clusterProcesses(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    for (const file of ['cmdline', 'environ']) {
      try {
        if (readFileSync(`/proc/${pid}/${file}`, 'utf8').includes(CLUSTER_DIR)) {
          pids.push(pid);
          break;
        }
      } catch {
        // Gone, or not readable.
      }
    }
  }
  return pids;
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

const namespaces = () => (spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout ?? '').split('\n').filter((line) => line.startsWith(network.namespacePrefix));
const bridgeExists = () => spawnSync('ip', ['link', 'show', network.bridge], { encoding: 'utf8' }).status === 0;

async function expectNothingLeft(started: Started): Promise<void> {
  const pgid = started.child.pid!;
  const deadline = Date.now() + 60_000;
  while (groupAlive(pgid) && Date.now() < deadline) await sleep(200);
  expect(groupAlive(pgid), `the cluster's own processes still run:\n${started.output()}`).toBe(false);
  expect(clusterProcesses(), started.output()).toEqual([]);
  expect(namespaces(), started.output()).toEqual([]);
  expect(bridgeExists(), started.output()).toBe(false);
  expect(started.output()).toContain('stopped; no process or namespace is left');
}

/** The first replica's URL, once the cluster printed that it is up. */
async function upAt(started: Started): Promise<string> {
  await waitFor('the cluster to come up', started, /Ctrl-C stops every process/, 150_000);
  return (await waitFor('the replica line', started, /control-plane-1\s+(http:\/\/\S+)/, 1_000))[1]!;
}

describe('npm run cluster leaves nothing behind, however it is stopped', () => {
  it('Ctrl-C twice (the second during the stop), SIGTERM and SIGHUP; an item without machine_target takes the first worker host\'s lane', { timeout: 420_000 }, async () => {
    const first = startCluster();
    const replicaUrl = await upAt(first);
    const store = await openStore({ backend: 'pg', pgDatabaseUrl: `postgres://postgres@127.0.0.1:5432/${LOCAL_CLUSTER_NAMING.database}` });
    try {
      await store.transaction(async (tx) => {
        await insertProject(tx, { project_id: 'no-target', project_name: 'No target', project_dir: 'no-target', workload_class: 'inference_eval' });
        await insertQueueItem(tx, { project_id: 'no-target', project_name: 'No target', workload_class: 'inference_eval' });
      });
    } finally {
      await store.close();
    }
    const token = readFileSync(join(CLUSTER_DIR, 'tokens', 'control-api.token'), 'utf8').trim();
    const dry = await fetch(`${replicaUrl}/control/dispatch-next`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ dry_run: true, requested_by: 'cluster-signals-test' }),
    });
    const answer = (await dry.json()) as { action: string; reason: string };
    expect(answer, JSON.stringify(answer)).toMatchObject({ action: 'dry_run_dispatch', reason: 'would dispatch no-target to gate-1' });

    process.kill(-first.child.pid!, 'SIGINT');
    await waitFor('the stop to begin', first, /\[cluster\] stopping/, 10_000);
    process.kill(-first.child.pid!, 'SIGINT');
    await waitFor('the second Ctrl-C to be answered', first, /SIGINT: already stopping/, 10_000);
    await expectNothingLeft(first);

    for (const signal of ['SIGTERM', 'SIGHUP'] as const) {
      const started = startCluster();
      await upAt(started);
      process.kill(-started.child.pid!, signal);
      await expectNothingLeft(started);
    }
  });
});
