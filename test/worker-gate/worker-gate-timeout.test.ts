import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackReceiver, gateClient, startGateProcess, waitUntil, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';
import { isProcessRunning } from '../support/process.ts';

// expected duration: ~65 s

// The reaper is off, so the 'linger' agent's child keeps the run waiting for its processes to exit until
// max_wait_after_idle_sec (its minimum, 60 s) runs out.
let receiver: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  fixture = await writeGateConfig({
    callbackUrl: receiver.url,
    // v1 cgroups, as this machine has them (test/worker-gate/run-cgroups.test.ts covers v2): the timeout stops the run's cgroup.
    overrides: { stale_project_process_reaper_enabled: false, max_wait_after_idle_sec: 60, run_cgroup_mode: 'v1' },
  });
  gate = await startGateProcess(fixture);
  client = gateClient(fixture);
});

afterAll(async () => {
  await gate?.kill('SIGTERM');
  await receiver?.down();
  if (fixture) await rm(fixture.dir, { recursive: true, force: true });
});

describe('a run whose processes never exit', () => {
  it('waits for them, then sends exactly one gate_timeout after max_wait_after_idle_sec', { timeout: 120_000 }, async () => {
    expect((await client.launch('romeo-run', 'linger')).status).toBe(200);
    const waiting = await receiver.waitFor('romeo-run', 'session_started', 20_000);
    expect(waiting.body.gate_state).toBe('running');

    const timeout = await receiver.waitFor('romeo-run', 'gate_timeout', 90_000);
    expect(timeout.body).toMatchObject({ gate_state: 'error', reason: expect.stringMatching(/max_wait_after_idle_sec \(60 s\).*tracked processes still alive/) });
    expect(timeout.at - Date.parse(timeout.body.idle_seen_at!)).toBeGreaterThanOrEqual(59_000);
    expect(timeout.body.idempotency_key).toBe(`romeo-run:gate_timeout:${timeout.body.idle_seen_at}`);
    const lingering = timeout.body.process_tracking.alive_pids;
    expect(lingering.length).toBeGreaterThan(0);

    // The timeout ends the run, and every end of a run stops its whole cgroup and removes it.
    await waitUntil('the lingering processes to be stopped with the run\'s cgroup', () => lingering.every((pid: number) => !isProcessRunning(pid)), 10_000);
    // The gate records them once the kernel has let go of the cgroup and it is removed: a moment after they died.
    const run = await waitUntil('the stop recorded on the run', async () => {
      const view = await client.runView('romeo-run');
      const reaped = new Set(view?.reaped.map((entry: { pid: number }) => entry.pid));
      return lingering.every((pid: number) => reaped.has(pid)) ? view : undefined;
    }, 15_000);
    for (const path of run?.cgroup.paths ?? []) expect(existsSync(path), path).toBe(false);

    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(receiver.forRun('romeo-run').map((c) => c.body.event_type)).toEqual(['session_started', 'gate_timeout']);
  });
});
