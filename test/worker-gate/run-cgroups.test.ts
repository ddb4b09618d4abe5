import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { joinArgvFor, RunCgroupHost, parentNameFor } from '../../worker-gate/run-cgroups/index.ts';
import { CallbackReceiver, gateClient, startGateProcess, waitUntil, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';
import { isProcessRunning, START_COMMAND_ARGS } from '../support/process.ts';

// expected duration: ~40 s

/**
 * The run's first process: starts the project's scenario.sh in the background (it stays in the run's cgroup) and
 * answers at once. No root_pid: the tests must hold without the pid-based tracking, on the cgroup alone.
 */
const DISPATCH_SCRIPT = `#!/bin/sh
nohup sh ./scenario.sh </dev/null >/dev/null 2>&1 &
echo '{}'
`;

/** A v2 directory the tests may make cgroups under: the unified hierarchy here (cgroup2 mounted at /sys/fs/cgroup/unified or /sys/fs/cgroup). */
function v2Root(): string {
  const mount = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .find((line) => line.split(' - ')[1]?.startsWith('cgroup2 '));
  if (!mount) throw new Error('no cgroup v2 hierarchy is mounted: these tests need one (mount -t cgroup2 none /sys/fs/cgroup/unified)');
  return mount.split(' ')[4]!;
}

/** Pids of live processes whose command line holds `marker` (a unique argument), read from /proc as the host sees them. */
function pidsRunning(marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.includes(marker) && isProcessRunning(Number(entry))) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

const marker = () => String(600_000 + Math.floor(Math.random() * 399_999));

interface GateUnderTest {
  fixture: GateFixture;
  gate: GateProcess;
  client: ReturnType<typeof gateClient>;
}

async function startGate(receiver: CallbackReceiver, overrides: Record<string, unknown>): Promise<GateUnderTest> {
  const scriptDir = await mkdtemp(join(tmpdir(), 'rcp-cgroup-script-'));
  const script = join(scriptDir, 'dispatch.sh');
  await writeFile(script, DISPATCH_SCRIPT);
  await chmod(scriptDir, 0o755);
  await chmod(script, 0o755);
  const fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { dispatch_script_path: script, ...overrides } });
  const gate = await startGateProcess(fixture);
  return { fixture, gate, client: gateClient(fixture) };
}

async function stopGate(under: GateUnderTest | undefined): Promise<void> {
  if (!under) return;
  await under.gate.kill('SIGTERM');
  await rm(under.fixture.dir, { recursive: true, force: true });
}

/** Prepares and dispatches a run whose scenario.sh is `scenario`; answers the run as the dashboard shows it. */
async function launch(under: GateUnderTest, runId: string, scenario: string, extra: Record<string, unknown> = {}) {
  const body = under.client.dispatchBody(runId, extra);
  const prepared = await under.client.prepare({ run_id: runId, project_id: body.project_id, project_dir: body.project_dir, prompt_file: 'prompt.md', prompt_text: '# test\n' });
  expect(prepared.status, JSON.stringify(prepared.body)).toBe(200);
  await writeFile(join(under.fixture.projectRoot, String(body.project_dir), 'scenario.sh'), scenario);
  const dispatched = await under.client.dispatch(body);
  expect(dispatched.status, JSON.stringify(dispatched.body)).toBe(200);
  return (await under.client.runView(runId))!;
}

const cgroupOf = (run: Record<string, any>) => run.cgroup as { kind: 'v1' | 'v2'; paths: string[] };
const hierarchy = (run: Record<string, any>, controller: string) => cgroupOf(run).paths.find((path) => path.includes(`/${controller}/`))!;
const readNumber = (dir: string, file: string) => Number(readFileSync(join(dir, file), 'utf8').trim());

let receiver: CallbackReceiver;
beforeAll(async () => {
  receiver = await CallbackReceiver.start();
});
afterAll(async () => {
  await receiver?.down();
});

describe.each(['v1', 'v2'] as const)('each run in its own cgroup (%s)', (kind) => {
  let under: GateUnderTest;
  beforeAll(async () => {
    under = await startGate(receiver, { run_cgroup_mode: kind, ...(kind === 'v2' ? { run_cgroup_v2_root: v2Root() } : {}) });
  }, 60_000);
  afterAll(() => stopGate(under));

  it('says which hierarchy holds the runs, and why', async () => {
    const { body } = await under.client.dashboard();
    expect(body.service.run_cgroups.mode).toBe(kind);
    expect(body.service.run_cgroups.reason).toMatch(kind === 'v1' ? /cgroup v1 hierarchies .*pids.*memory.*freezer/ : /cgroup v2 under run_cgroup_v2_root/);
    expect(under.gate.output()).toContain(`each run gets its own cgroup (${kind})`);
  });

  it('keeps a setsid + cd / escapee as the run\'s, and cancel stops it and removes the cgroup', { timeout: 60_000 }, async () => {
    const runId = `escapee-${kind}-run`;
    const tag = marker();
    // The escapee leaves the project, takes a session of its own and outlives the process that started it.
    await launch(under, runId, `setsid sh -c 'cd / && exec sleep ${tag}' </dev/null >/dev/null 2>&1 &\nexit 0\n`);
    const [escapee] = await waitUntil('the escapee to run', () => (pidsRunning(tag).length ? pidsRunning(tag) : undefined), 10_000);
    const run = await waitUntil('the gate to see the escapee as the run\'s', async () => {
      const view = await under.client.runView(runId);
      return view?.alive_pids.includes(escapee) ? view : undefined;
    }, 15_000);
    expect(cgroupOf(run).kind).toBe(kind);
    for (const path of cgroupOf(run).paths) expect(readFileSync(join(path, 'cgroup.procs'), 'utf8').split('\n')).toContain(String(escapee));
    expect(run.gate_state).toBe('running');

    const cancelled = await under.client.call('POST', `/runs/${runId}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.stopped).toContainEqual({ pid: escapee, outcome: 'killed' });
    expect(isProcessRunning(escapee!)).toBe(false);
    for (const path of cgroupOf(run).paths) expect(existsSync(path), path).toBe(false);
  });

  it('stops what an ended run left behind and removes its cgroup', { timeout: 60_000 }, async () => {
    const runId = `ended-${kind}-run`;
    const tag = marker();
    // The agent leaves a process behind in its own session, then reports its end with a failing status.
    const scenario = [
      `setsid sh -c 'cd / && exec sleep ${tag}' </dev/null >/dev/null 2>&1 &`,
      'sleep 1',
      `curl -s -o /dev/null -X POST -H "authorization: Bearer $GATE_EVENT_TOKEN" -H 'content-type: application/json' \\`,
      `  -d "{\\"event\\":\\"session-end\\",\\"run_id\\":\\"$RUN_ID\\",\\"exit_code\\":3}" "$GATE_EVENT_URL"`,
      '',
    ].join('\n');
    const run = await launch(under, runId, scenario);
    const [leftover] = await waitUntil('the leftover to run', () => (pidsRunning(tag).length ? pidsRunning(tag) : undefined), 10_000);
    const ended = await waitUntil('the run to end and its cgroup to go', async () => {
      const view = await under.client.runView(runId);
      return view?.gate_state === 'error' && cgroupOf(run).paths.every((path) => !existsSync(path)) ? view : undefined;
    }, 20_000);
    expect(ended.gate_reason).toMatch(/status 3|exit/);
    await waitUntil('the leftover to be gone', () => !isProcessRunning(leftover!), 5_000);
    const { body } = await under.client.dashboard();
    expect(body.events.some((event: any) => event.kind === 'run_cgroup_removed' && event.run_id === runId)).toBe(true);
  });

  it('leaves no directory of its own behind when it stops with its runs over', { timeout: 30_000 }, async () => {
    const { body } = await under.client.dashboard();
    const parents = body.service.run_cgroups.parents as string[];
    expect(parents.length).toBeGreaterThan(0);
    for (const parent of parents) expect(existsSync(parent), parent).toBe(true);
    await under.gate.kill('SIGTERM');
    for (const parent of parents) expect(existsSync(parent), parent).toBe(false);
  });
});

describe('limits per workload profile (v1 hierarchies)', () => {
  let under: GateUnderTest;
  beforeAll(async () => {
    under = await startGate(receiver, {
      run_cgroup_mode: 'v1',
      // The fork bomb runs beside a neighbour run.
      run_slots: 2,
      workload_profiles: {
        // Little CPU for the fork bomb, so it costs the machine little while it runs into pids.max.
        cpu_only: { run_pids_max: 64, run_cpu_max_cores: 0.2 },
        training: { run_memory_max_mib: 48 },
      },
    });
  }, 60_000);
  afterAll(() => stopGate(under));

  it('writes the limits of the run\'s workload class into its cgroup, and the defaults elsewhere', { timeout: 60_000 }, async () => {
    const runId = 'limits-default-run';
    const run = await launch(under, runId, 'exec sleep 30\n');
    expect(readNumber(hierarchy(run, 'pids'), 'pids.max')).toBe(4096);
    // The default memory cap is 75 % of the machine's memory, rounded down to the kernel's page size.
    const memTotalKib = Number(/^MemTotal:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))![1]);
    expect(readNumber(hierarchy(run, 'memory'), 'memory.limit_in_bytes') / (memTotalKib * 1024)).toBeCloseTo(0.75, 2);
    expect(readNumber(hierarchy(run, 'cpu'), 'cpu.cfs_quota_us')).toBe(-1);
    await under.client.call('POST', `/runs/${runId}/cancel`);
  });

  it('stops a fork bomb at pids.max while the gate and another run stay alive', { timeout: 90_000 }, async () => {
    const neighbourTag = marker();
    await launch(under, 'neighbour-run', `exec sleep ${neighbourTag}\n`);
    const [neighbour] = await waitUntil('the neighbour to run', () => (pidsRunning(neighbourTag).length ? pidsRunning(neighbourTag) : undefined), 10_000);
    const seesNeighbour = async () => ((await under.client.runView('neighbour-run'))?.alive_pids.includes(neighbour) ? true : undefined);
    await waitUntil('the gate to see the neighbour', seesNeighbour, 10_000);

    // Each level forks two more; bash outlives a refused fork (dash would exit), so the bomb keeps pressing the limit.
    const bomb = await launch(under, 'bomb-run', "exec bash -c 'bomb() { bomb & bomb & wait; }; while :; do bomb; done' 2>/dev/null\n", { workload_class: 'cpu_only' });
    const pids = hierarchy(bomb, 'pids');
    expect(readNumber(pids, 'pids.max')).toBe(64);
    expect(readNumber(hierarchy(bomb, 'cpu'), 'cpu.cfs_quota_us')).toBe(20_000);
    // pids.events counts the forks refused at the limit: the bomb has hit it.
    await waitUntil('the fork bomb to reach pids.max', () => /^max [1-9]/m.test(readFileSync(join(pids, 'pids.events'), 'utf8')), 30_000);
    expect(readNumber(pids, 'pids.current')).toBeLessThanOrEqual(64);

    expect((await fetch(`${under.fixture.url}/healthz`)).status).toBe(200);
    expect(isProcessRunning(neighbour!)).toBe(true);
    // Samples taken while the bomb runs still find the neighbour.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await seesNeighbour()).toBe(true);

    const cancelled = await under.client.call('POST', '/runs/bomb-run/cancel');
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.stopped.length).toBeGreaterThan(0);
    expect(cancelled.body.stopped.every((stop: { outcome: string }) => stop.outcome === 'killed')).toBe(true);
    for (const path of cgroupOf(bomb).paths) expect(existsSync(path), path).toBe(false);
    expect(isProcessRunning(neighbour!)).toBe(true);
    await under.client.call('POST', '/runs/neighbour-run/cancel');
    expect(isProcessRunning(neighbour!)).toBe(false);
  });

  it('lets the kernel kill a memory hog at the run\'s memory limit, never the gate', { timeout: 60_000 }, async () => {
    const runId = 'hog-run';
    const tag = marker();
    // tail holds a whole "line" of /dev/zero's NULs in memory: it grows until the cgroup's limit ends it.
    const run = await launch(under, runId, `head -c 400000000 /dev/zero | tail > /dev/null\necho "$?" > hog.status\nexec sleep ${tag}\n`, { workload_class: 'training' });
    const memory = hierarchy(run, 'memory');
    expect(readNumber(memory, 'memory.limit_in_bytes')).toBe(48 * 1024 * 1024);
    const statusFile = join(under.fixture.projectRoot, 'hog', 'hog.status');
    const status = await waitUntil('the hog to end', () => (existsSync(statusFile) ? readFileSync(statusFile, 'utf8').trim() : undefined), 30_000);
    expect(status).toBe('137');
    expect(readFileSync(join(memory, 'memory.oom_control'), 'utf8')).toMatch(/^oom_kill [1-9]/m);
    expect(readNumber(memory, 'memory.max_usage_in_bytes')).toBeLessThanOrEqual(48 * 1024 * 1024);
    expect((await fetch(`${under.fixture.url}/healthz`)).status).toBe(200);
    // The run itself goes on: the shell that started the hog is still there.
    await waitUntil('the run to go on after the hog', () => pidsRunning(tag).length === 1, 10_000);
    await under.client.call('POST', `/runs/${runId}/cancel`);
    expect(pidsRunning(tag)).toEqual([]);
  });
});

describe('a gate restart', () => {
  it('keeps the cgroup of a run it still tracks and sweeps the ones no run holds', { timeout: 90_000 }, async () => {
    const under = await startGate(receiver, { run_cgroup_mode: 'v1' });
    try {
      const tag = marker();
      const run = await launch(under, 'kept-run', `exec sleep ${tag}\n`);
      const [kept] = await waitUntil('the run to run', () => (pidsRunning(tag).length ? pidsRunning(tag) : undefined), 10_000);
      await under.gate.kill('SIGKILL');

      // A cgroup this gate's parent holds that no run record names: a leftover of a run the gate no longer knows.
      const host = RunCgroupHost.detect({ state_dir: join(under.fixture.dir, 'state'), run_cgroup_mode: 'v1', run_cgroup_v2_root: '', run_cgroup_parent: '' });
      const stray = (await host.create('stray', { memoryBytes: null, pidsMax: null, cpuCores: null }))!;
      const strayTag = marker();
      const argv = [...stray.joinArgv(), '/bin/sleep', strayTag];
      spawn(argv[0]!, argv.slice(1), { stdio: 'ignore', detached: true }).unref();
      await waitUntil('the stray to run', () => stray.pids().length === 1, 5_000);
      expect(host.status().parents.every((parent) => parent.endsWith(parentNameFor({ state_dir: join(under.fixture.dir, 'state'), run_cgroup_parent: '' })))).toBe(true);

      under.gate = await startGateProcess(under.fixture);
      expect(pidsRunning(strayTag)).toEqual([]);
      for (const path of stray.record().paths) expect(existsSync(path), path).toBe(false);
      expect(under.gate.output()).toContain('stopped and removed run cgroups no tracked run holds');

      const resumed = await waitUntil('the gate to track the run again', async () => {
        const view = await under.client.runView('kept-run');
        return view?.alive_pids.includes(kept) ? view : undefined;
      }, 15_000);
      expect(resumed.cgroup).toEqual(run.cgroup);
      await under.client.call('POST', '/runs/kept-run/cancel');
      expect(isProcessRunning(kept!)).toBe(false);
    } finally {
      await stopGate(under);
    }
  });
});

describe('a v2 cgroup delegated to the gate alone (as systemd Delegate=yes gives it)', () => {
  it('moves the gate into <own>/gate and makes the runs\' cgroups beside it', { timeout: 90_000 }, async () => {
    const delegated = join(v2Root(), `rcp-test-delegated-${marker()}`);
    mkdirSync(delegated);
    const scriptDir = await mkdtemp(join(tmpdir(), 'rcp-cgroup-script-'));
    const script = join(scriptDir, 'dispatch.sh');
    await writeFile(script, DISPATCH_SCRIPT);
    await chmod(scriptDir, 0o755);
    await chmod(script, 0o755);
    const fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { dispatch_script_path: script, run_cgroup_mode: 'v2' } });
    // The gate starts inside the delegated cgroup, alone there, as a service's main process does.
    const argv = [...joinArgvFor([delegated]), process.execPath, ...START_COMMAND_ARGS];
    const child = spawn(argv[0]!, argv.slice(1), { env: { ...process.env, SVC_CONFIG: fixture.configPath, SVC_CONTROL_PLANE_CONFIG: '', LOG_LEVEL: 'info' }, stdio: 'ignore' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await waitUntil('the gate to answer /healthz', async () => ((await fetch(`${fixture.url}/healthz`).catch(() => undefined))?.status === 200 ? true : undefined), 60_000);
      const under = { fixture, gate: undefined as unknown as GateProcess, client: gateClient(fixture) };
      const { body } = await under.client.dashboard();
      expect(body.service.run_cgroups).toMatchObject({ mode: 'v2' });
      expect(body.service.run_cgroups.reason).toContain(`the gate's delegated cgroup ${delegated}`);
      expect(readFileSync(join(delegated, 'gate', 'cgroup.procs'), 'utf8').split('\n')).toContain(String(child.pid));
      expect(readFileSync(join(delegated, 'cgroup.procs'), 'utf8').trim()).toBe('');

      const tag = marker();
      const run = await launch(under, 'delegated-run', `setsid sh -c 'cd / && exec sleep ${tag}' </dev/null >/dev/null 2>&1 &\nexit 0\n`);
      expect(cgroupOf(run).paths[0]!.startsWith(`${delegated}/rcp-gate-`)).toBe(true);
      const [escapee] = await waitUntil('the escapee to run', () => (pidsRunning(tag).length ? pidsRunning(tag) : undefined), 10_000);
      expect(readFileSync(join(cgroupOf(run).paths[0]!, 'cgroup.procs'), 'utf8').split('\n')).toContain(String(escapee));
      const cancelled = await under.client.call('POST', '/runs/delegated-run/cancel');
      expect(cancelled.body.stopped).toContainEqual({ pid: escapee, outcome: 'killed' });
      expect(existsSync(cgroupOf(run).paths[0]!)).toBe(false);
    } finally {
      child.kill('SIGTERM');
      await exited;
      // The gate removed its empty runs' parent on the way out; its leaf and the delegated cgroup are the test's.
      for (const dir of [join(delegated, 'gate'), delegated]) if (existsSync(dir)) rmdirSync(dir);
      await rm(fixture.dir, { recursive: true, force: true });
      await rm(scriptDir, { recursive: true, force: true });
    }
  });
});

describe('choosing the hierarchy', () => {
  const base = { state_dir: '/nonexistent/rcp-cgroup-choice', run_cgroup_v2_root: '', run_cgroup_parent: 'rcp-test-choice' };
  const made: string[] = [];
  const detect = (overrides: Partial<Parameters<typeof RunCgroupHost.detect>[0]>) => {
    const host = RunCgroupHost.detect({ ...base, run_cgroup_mode: 'auto', ...overrides });
    made.push(...host.status().parents);
    return host;
  };
  afterAll(() => {
    for (const dir of made) if (existsSync(dir)) rmdirSync(dir);
  });

  it('says so when runs get no cgroup (none)', () => {
    const status = detect({ run_cgroup_mode: 'none' }).status();
    expect(status).toMatchObject({ mode: 'none', parents: [] });
    expect(status.reason).toMatch(/process tree/);
  });

  it('takes v1 under auto where the gate sits in the v2 root, which is no delegated subtree', () => {
    const status = detect({ run_cgroup_mode: 'auto' }).status();
    expect(readFileSync('/proc/self/cgroup', 'utf8')).toMatch(/^0::\/$/m);
    expect(status.mode).toBe('v1');
    expect(status.reason).toMatch(/no v2: the gate runs in the root of the v2 hierarchy/);
  });

  it('reports the v2 limits it cannot apply where the controllers are not offered', () => {
    const root = v2Root();
    const offered = readFileSync(join(root, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
    const status = detect({ run_cgroup_mode: 'v2', run_cgroup_v2_root: root }).status();
    expect(status.mode).toBe('v2');
    const missing = ['memory', 'pids', 'cpu'].filter((name) => !offered.includes(name));
    expect(status.limits_unavailable.map((entry) => entry.split(' ')[0])).toEqual(missing);
  });

  it('refuses an explicit v2 mode it cannot have', () => {
    expect(() => RunCgroupHost.detect({ ...base, run_cgroup_mode: 'v2', run_cgroup_v2_root: '/nonexistent/cgroup' })).toThrow(/run_cgroup_mode v2: .*no cgroup v2 directory/);
  });
});

describe('the systemd unit', () => {
  const unit = readFileSync(new URL('../../deploy/systemd/rcp-worker-gate.service', import.meta.url), 'utf8');
  const values = (key: string) => [...unit.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((match) => match[1]!.trim());

  it('delegates the controllers whose limits the gate writes, and starts the gate in the leaf it looks for', () => {
    expect(values('Delegate')[0]!.split(/\s+/).sort()).toEqual(['cpu', 'memory', 'pids']);
    expect(values('DelegateSubgroup')).toEqual(['gate']);
    expect(values('KillMode')).toEqual(['process']);
  });

  it('runs node itself, alone in its cgroup, as a user of its own that is not the agent user', () => {
    expect(values('ExecStart')[0]).toMatch(/^\/usr\/bin\/node .*bin\/start\.js$/);
    expect(values('User')).toEqual(['rcp-gate']);
    expect(values('User')).not.toContain('rcp-agent');
    expect(values('AmbientCapabilities')[0]!.split(/\s+/)).toEqual(expect.arrayContaining(['CAP_SETUID', 'CAP_SETGID']));
  });
});
