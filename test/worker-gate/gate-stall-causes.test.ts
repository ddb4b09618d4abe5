import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackReceiver, gateClient, startGateProcess, waitUntil, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';
import { isProcessRunning } from '../support/process.ts';

/**
 * A real gate process running the fake agent's dispatch script (the script runtime): a run that shows no progress for
 * its workload class's stall_after_sec is stopped, processes and all, and ends in gate_error "stalled: …"; every
 * finishing callback says why the run ended (its cause).
 */

// expected duration: ~45 s

const STALL_SEC = 3;

let receiver: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;
/** A gate that gives runs no cgroup: a stalled run is stopped by its tracked processes. */
let plainFixture: GateFixture;
let plainGate: GateProcess;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  // Only cpu_only runs stall this soon: the global default (600 s) holds for the others.
  // training runs stall as soon, but a run that computes shows work from its own CPU (a low threshold: the suite's
  // other files share the cores).
  fixture = await writeGateConfig({
    callbackUrl: receiver.url,
    // The tests below run side by side on this gate, a run each.
    overrides: { run_slots: 8, workload_profiles: { cpu_only: { stall_after_sec: STALL_SEC }, training: { stall_after_sec: STALL_SEC, cpu_idle_threshold_pct: 5 } } },
  });
  plainFixture = await writeGateConfig({
    callbackUrl: receiver.url,
    overrides: { run_cgroup_mode: 'none', workload_profiles: { cpu_only: { stall_after_sec: STALL_SEC } } },
  });
  [gate, plainGate] = await Promise.all([startGateProcess(fixture), startGateProcess(plainFixture)]);
  client = gateClient(fixture);
});

afterAll(async () => {
  await Promise.all([gate?.kill('SIGTERM'), plainGate?.kill('SIGTERM')]);
  await receiver?.down();
  for (const dir of [fixture?.dir, plainFixture?.dir]) if (dir) await rm(dir, { recursive: true, force: true });
});

describe.concurrent('a stalled run, and the causes a run ends with', () => {
  it('a script agent that posts nothing after its start is stopped after stall_after_sec and ends in gate_error "stalled: …"', { timeout: 60_000 }, async () => {
    const dispatched = await client.launch('stall-hold-run', 'hold', { workload_class: 'cpu_only' });
    expect(dispatched.status).toBe(200);
    const rootPid = dispatched.body.root_pid as number;
    const dispatchedAt = Date.now();

    // The agent's start is its last progress (or, on a loaded machine where it is slower than STALL_SEC, the dispatch).
    const failed = await receiver.waitFor('stall-hold-run', 'gate_error', 30_000);
    expect(failed.at - Date.parse(dispatched.body.dispatched_at)).toBeGreaterThanOrEqual(STALL_SEC * 1000);
    expect(failed.at - dispatchedAt).toBeLessThan((STALL_SEC + 15) * 1000);
    expect(failed.body.gate_state).toBe('error');
    expect(failed.body.reason).toMatch(new RegExp(`^stalled: no model answer, tool event or usage change for ${STALL_SEC} s`));
    expect(failed.body.cause).toMatchObject({ kind: 'stall', message: expect.stringMatching(/^stalled: /) });

    // Its agent is stopped with it, and the gate's record says so.
    await waitUntil('the stalled agent to be stopped', () => !isProcessRunning(rootPid), 15_000);
    const view = await waitUntil('the stop recorded', async () => {
      const run = await client.runView('stall-hold-run');
      return run?.reaped?.some((entry: { pid: number }) => entry.pid === rootPid) ? run : undefined;
    }, 15_000);
    expect(view.gate_state).toBe('error');
    expect(view.cause).toMatchObject({ kind: 'stall' });
  });

  it('without a cgroup, the stalled run\'s tracked processes are stopped', { timeout: 60_000 }, async () => {
    const plain = gateClient(plainFixture);
    const dispatched = await plain.launch('stall-plain-run', 'hold', { workload_class: 'cpu_only' });
    expect(dispatched.status).toBe(200);
    const rootPid = dispatched.body.root_pid as number;
    const failed = await receiver.waitFor('stall-plain-run', 'gate_error', 30_000);
    expect(failed.body.cause).toMatchObject({ kind: 'stall' });
    await waitUntil('the stalled agent to be stopped', () => !isProcessRunning(rootPid), 15_000);
    const view = await waitUntil('the stop recorded', async () => {
      const run = await plain.runView('stall-plain-run');
      return run?.reaped?.some((entry: { pid: number; outcome: string }) => entry.pid === rootPid && /terminated|killed/.test(entry.outcome)) ? run : undefined;
    }, 15_000);
    expect(view.cgroup ?? null).toBeNull();
  });

  it('a run of a class with the default stall_after_sec is not stopped while it waits', { timeout: 30_000 }, async () => {
    const dispatched = await client.launch('stall-default-run', 'hold');
    expect(dispatched.status).toBe(200);
    await receiver.waitFor('stall-default-run', 'session_started', 20_000);
    await new Promise((resolve) => setTimeout(resolve, (STALL_SEC + 3) * 1000));
    expect((await client.runView('stall-default-run'))?.gate_state).toBe('running');
    expect(isProcessRunning(dispatched.body.root_pid as number)).toBe(true);
    process.kill(dispatched.body.root_pid as number, 'SIGKILL');
  });

  it('a script agent that computes without a word is not stalled: its own CPU is its progress', { timeout: 40_000 }, async () => {
    const dispatched = await client.launch('stall-compute-run', 'compute', { workload_class: 'training' });
    expect(dispatched.status).toBe(200);
    await receiver.waitFor('stall-compute-run', 'session_started', 20_000);
    await new Promise((resolve) => setTimeout(resolve, (STALL_SEC + 5) * 1000));
    expect((await client.runView('stall-compute-run'))?.gate_state).toBe('running');
    expect(isProcessRunning(dispatched.body.root_pid as number)).toBe(true);
    expect((await client.call('POST', '/runs/stall-compute-run/cancel')).status).toBe(200);
  });

  it('a script agent killed by SIGKILL: its processes vanish without an end, and the run ends in gate_error with cause crash', { timeout: 40_000 }, async () => {
    const dispatched = await client.launch('killed-run', 'hold');
    expect(dispatched.status).toBe(200);
    await receiver.waitFor('killed-run', 'session_started', 20_000);
    process.kill(dispatched.body.root_pid as number, 'SIGKILL');
    const failed = await receiver.waitFor('killed-run', 'gate_error', 20_000);
    expect(failed.body.cause).toEqual({ kind: 'crash', message: 'every tracked process exited before the agent reported idle, stop or end' });
  });

  it('a process left behind and reaped: the finishing callback names it in its cause', { timeout: 90_000 }, async () => {
    expect((await client.launch('reaped-run', 'linger')).status).toBe(200);
    const finished = await receiver.waitFor('reaped-run', 'session_finished_ready', 80_000);
    expect(finished.body.cause).toMatchObject({ kind: 'reaped', reaped: [expect.objectContaining({ command: expect.stringContaining('rcp-linger-marker'), outcome: expect.any(String) })] });
    expect(finished.body.cause?.reaped?.[0]?.pid).toBeGreaterThan(0);
  });
});
