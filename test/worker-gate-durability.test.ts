import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CallbackReceiver,
  dispatchCount,
  gateClient,
  startGateProcess,
  waitUntil,
  writeGateConfig,
  type GateFixture,
  type GateProcess,
} from './support/gate.ts';

const WINDOW_MS = 80_000;
// The 'slow' fake agent keeps working this long, so the gate can be killed while it is alive.
const SLOW_AGENT_ENV = { FAKE_AGENT_WORK_SEC: '8' };

let receiver: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  fixture = await writeGateConfig({ callbackUrl: receiver.url });
  gate = await startGateProcess(fixture, SLOW_AGENT_ENV);
  client = gateClient(fixture);
});

afterAll(async () => {
  await gate?.kill('SIGTERM');
  await receiver?.down();
  if (fixture) await rm(fixture.dir, { recursive: true, force: true });
});

/** Kills the gate with SIGKILL and starts it again after `downMs`. */
async function restartGate(downMs = 0): Promise<void> {
  await gate.kill('SIGKILL');
  await new Promise((resolve) => setTimeout(resolve, downMs));
  gate = await startGateProcess(fixture, SLOW_AGENT_ENV);
}

const agentLog = (projectId: string) => readFile(join(fixture.projectRoot, projectId, '.research', 'agent.log'), 'utf8');

describe('a worker gate killed with SIGKILL and restarted', () => {
  it('resumes tracking live runs by pid and still sends exactly one callback of each kind', { timeout: 160_000 }, async () => {
    // One run is inside its quiet window when the gate dies, the other still has its agent working.
    expect((await client.launch('mike-run', 'normal')).status).toBe(200);
    expect((await client.launch('november-run', 'slow')).status).toBe(200);
    await receiver.waitFor('november-run', 'session_started', 20_000);
    await waitUntil('mike-run to wait for its quiet window', async () => (await client.runView('mike-run'))?.gate_state === 'finished_pending_gate' || undefined, 20_000);
    const beforeKill = await client.runView('november-run');
    expect(beforeKill!.processes_alive).toBe(true);

    // Down until well after the slow agent has finished working: its idle and end posts wait for the gate.
    await restartGate(12_000);

    const afterRestart = await client.runView('november-run');
    expect(afterRestart!.root_pid).toBe(beforeKill!.root_pid);
    await waitUntil('the restarted gate to see the agent alive', async () => (await client.runView('november-run'))?.processes_alive || undefined, 10_000);

    await Promise.all([
      receiver.waitFor('mike-run', 'session_finished_ready', WINDOW_MS),
      receiver.waitFor('november-run', 'session_finished_ready', WINDOW_MS + 10_000),
    ]);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    for (const runId of ['mike-run', 'november-run']) {
      expect(receiver.forRun(runId).map((c) => c.body.event_type)).toEqual(['session_started', 'session_finished_ready']);
      expect(await dispatchCount(fixture, runId)).toBe(1);
    }
    const log = await agentLog('november');
    expect(log).toMatch(/post session-idle failed \(.+\); retrying in \d+ ms/);
    expect(log).toMatch(/posted session-end \(HTTP 200/);
    expect(log).not.toMatch(/could not post/);
  });
});

describe('callbacks while the receiver is down', () => {
  it('keeps them in the outbox, across a gate restart, and delivers each once when the receiver is back', { timeout: 150_000 }, async () => {
    await receiver.down();
    expect((await client.launch('oscar-run', 'normal')).status).toBe(200);
    const pending = await waitUntil(
      'a failed delivery attempt',
      async () => {
        const { body } = await client.dashboard();
        const entry = (body.callbacks as Record<string, any>[]).find((c) => c.run_id === 'oscar-run' && c.attempts >= 1);
        return entry && body.totals.callback_pending >= 1 ? entry : undefined;
      },
      20_000,
    );
    expect(pending.delivered_at).toBeNull();
    expect(pending.last_error).toEqual(expect.any(String));

    await restartGate();
    expect((await client.dashboard()).body.totals.callback_pending).toBeGreaterThanOrEqual(1);
    await receiver.up();

    await receiver.waitFor('oscar-run', 'session_started', 90_000);
    await receiver.waitFor('oscar-run', 'session_finished_ready', WINDOW_MS);
    await waitUntil('the outbox to drain', async () => (await client.dashboard()).body.totals.callback_pending === 0 || undefined, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(receiver.forRun('oscar-run').map((c) => c.body.event_type)).toEqual(['session_started', 'session_finished_ready']);
  });
});

describe('a gate killed while its dispatch script runs', () => {
  it('never starts that run a second time: after the restart the run is in error and a repeated dispatch is 409', { timeout: 90_000 }, async () => {
    const launched = client.launch('quebec-run', 'hang').catch((error: Error) => error);
    const scriptPid = await waitUntil(
      'the dispatch script to start',
      async () => {
        const line = (await readFile(fixture.counterFile, 'utf8').catch(() => '')).split('\n').find((l) => l.includes('"quebec-run"'));
        return line ? (JSON.parse(line) as { pid: number }).pid : undefined;
      },
      20_000,
    );
    try {
      await restartGate();
      expect(await launched).toBeInstanceOf(Error);

      const again = await client.dispatch(client.dispatchBody('quebec-run'));
      expect(again.status).toBe(409);
      expect(again.body.detail).toMatch(/restarted while its dispatch script ran/);
      expect(await client.runView('quebec-run')).toMatchObject({ dispatch_status: 'interrupted', gate_state: 'error' });
      expect(await dispatchCount(fixture, 'quebec-run')).toBe(1);
    } finally {
      try {
        process.kill(-scriptPid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
});
