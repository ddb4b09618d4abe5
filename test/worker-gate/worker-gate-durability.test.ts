import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_CANCELS_BEFORE_DISPATCH } from '../../worker-gate/run-records.ts';
import {
  CallbackReceiver,
  dispatchCount,
  gateClient,
  startGateProcess,
  waitUntil,
  writeGateConfig,
  type GateFixture,
  type GateProcess,
} from '../support/gate.ts';

// expected duration: ~80 s

const WINDOW_MS = 80_000;
// The 'slow' fake agent keeps working this long, so the gate can be killed while it is alive; its child lives 20 s
// longer, so the agent (which ends after its child) is still alive when a gate that was down 12 s comes back, however
// soon its retried idle event then gets through.
const SLOW_AGENT_ENV = { FAKE_AGENT_WORK_SEC: '8', FAKE_AGENT_CHILD_EXTRA_SEC: '20' };

/** One test's own callback receiver and gate, so the tests (each waits out quiet windows) run side by side. */
class Rig {
  receiver!: CallbackReceiver;
  fixture!: GateFixture;
  gate!: GateProcess;
  client!: ReturnType<typeof gateClient>;

  static async start(): Promise<Rig> {
    const rig = new Rig();
    rig.receiver = await CallbackReceiver.start();
    // Two runs at once on one rig's gate (resuming live runs).
    rig.fixture = await writeGateConfig({ callbackUrl: rig.receiver.url, overrides: { run_slots: 2 } });
    rig.gate = await startGateProcess(rig.fixture, SLOW_AGENT_ENV);
    rig.client = gateClient(rig.fixture);
    rigs.push(rig);
    return rig;
  }

  /** Kills the gate with SIGKILL and starts it again after `downMs`. */
  async restartGate(downMs = 0): Promise<void> {
    await this.gate.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, downMs));
    this.gate = await startGateProcess(this.fixture, SLOW_AGENT_ENV);
  }

  /** The gate's list of runs cancelled before their dispatch reached it. */
  get cancelsBeforeDispatchPath(): string {
    return join(this.fixture.dir, 'state', 'worker-gate', 'cancelled-before-dispatch.json');
  }

  /** Cancels runs the gate has not seen: each answer is the usual 404. */
  async cancelUnseen(...runIds: string[]): Promise<void> {
    for (const runId of runIds) {
      const answer = await this.client.call('POST', `/runs/${runId}/cancel`);
      expect(answer.status, JSON.stringify(answer.body)).toBe(404);
      expect(answer.body.detail).toMatch(/a later dispatch of it will be refused/);
    }
  }

  /** Each run's dispatch is refused with 409 and its agent never starts. */
  async expectDispatchRefused(...runIds: string[]): Promise<void> {
    for (const runId of runIds) {
      const answer = await this.client.launch(runId, 'normal');
      expect(answer.status, JSON.stringify(answer.body)).toBe(409);
      expect(answer.body.detail).toMatch(/before its dispatch reached this gate; it is not started/);
      expect(await dispatchCount(this.fixture, runId)).toBe(0);
    }
  }

  agentLog(projectId: string): Promise<string> {
    return readFile(join(this.fixture.projectRoot, projectId, '.research', 'agent.log'), 'utf8');
  }

  async close(): Promise<void> {
    await this.gate?.kill('SIGTERM');
    await this.receiver?.down();
    if (this.fixture) await rm(this.fixture.dir, { recursive: true, force: true });
  }
}

const rigs: Rig[] = [];
afterAll(async () => {
  await Promise.all(rigs.map((rig) => rig.close()));
});

describe.concurrent('a worker gate killed with SIGKILL and restarted', () => {
  it('resumes tracking live runs by pid and still sends exactly one callback of each kind', { timeout: 160_000 }, async () => {
    const rig = await Rig.start();
    const { receiver, client, fixture } = rig;
    // One run is inside its quiet window when the gate dies, the other still has its agent working.
    expect((await client.launch('mike-run', 'normal')).status).toBe(200);
    expect((await client.launch('november-run', 'slow')).status).toBe(200);
    await receiver.waitFor('november-run', 'session_started', 20_000);
    await waitUntil('mike-run to wait for its quiet window', async () => (await client.runView('mike-run'))?.gate_state === 'finished_pending_gate' || undefined, 20_000);
    const beforeKill = await client.runView('november-run');
    expect(beforeKill!.processes_alive).toBe(true);

    // Down until well after the slow agent has finished working: its idle and end posts wait for the gate.
    await rig.restartGate(12_000);

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
    const log = await rig.agentLog('november');
    expect(log).toMatch(/post session-idle failed \(.+\); retrying in \d+ ms/);
    expect(log).toMatch(/posted session-end \(HTTP 200/);
    expect(log).not.toMatch(/could not post/);
  });

  it('keeps callbacks in the outbox while the receiver is down, across a gate restart, and delivers each once when it is back', { timeout: 150_000 }, async () => {
    const rig = await Rig.start();
    const { receiver, client } = rig;
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

    await rig.restartGate();
    expect((await client.dashboard()).body.totals.callback_pending).toBeGreaterThanOrEqual(1);
    await receiver.up();

    await receiver.waitFor('oscar-run', 'session_started', 90_000);
    await receiver.waitFor('oscar-run', 'session_finished_ready', WINDOW_MS);
    await waitUntil('the outbox to drain', async () => (await client.dashboard()).body.totals.callback_pending === 0 || undefined, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(receiver.forRun('oscar-run').map((c) => c.body.event_type)).toEqual(['session_started', 'session_finished_ready']);
  });

  it('never starts a run whose dispatch script was running when it died a second time: the run is in error and a repeated dispatch is 409', { timeout: 90_000 }, async () => {
    const rig = await Rig.start();
    const { client, fixture } = rig;
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
      await rig.restartGate();
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

describe('runs cancelled before their dispatch reached the gate', () => {
  it('are still refused after a restart whose list holds an entry it cannot read and more entries than it keeps: it keeps the newest that parse', { timeout: 60_000 }, async () => {
    const rig = await Rig.start();
    await rig.cancelUnseen('uniform-run', 'victor-run');
    await rig.gate.kill('SIGKILL');
    const remembered = JSON.parse(await readFile(rig.cancelsBeforeDispatchPath, 'utf8')) as { run_id: string; cancelled_at: string }[];
    expect(remembered.map((entry) => entry.run_id)).toEqual(['uniform-run', 'victor-run']);
    const older = Array.from({ length: 2 * MAX_CANCELS_BEFORE_DISPATCH }, (_, n) => ({ run_id: `older-${n}-run`, cancelled_at: remembered[0]!.cancelled_at }));
    await writeFile(rig.cancelsBeforeDispatchPath, JSON.stringify([...older, { run_id: 'not a run id', cancelled_at: 7 }, ...remembered]));

    rig.gate = await startGateProcess(rig.fixture, SLOW_AGENT_ENV);
    await rig.expectDispatchRefused('uniform-run', 'victor-run');
    expect(rig.gate.output()).toMatch(/skipping entries of the runs cancelled before their dispatch/);
  });

  it('refuse to start a gate whose list is not JSON, naming the file; without the file it starts', { timeout: 60_000 }, async () => {
    const rig = await Rig.start();
    await rig.cancelUnseen('whiskey-run');
    await rig.gate.kill('SIGKILL');
    await writeFile(rig.cancelsBeforeDispatchPath, '[{"run_id": "whiskey-run", "cancel');

    const refused = await startGateProcess(rig.fixture, SLOW_AGENT_ENV).then(
      () => new Error('the gate started'),
      (error: Error) => error,
    );
    expect(refused.message).toContain(`${rig.cancelsBeforeDispatchPath} is not a JSON list`);
    expect(refused.message).toMatch(/delete it to start the gate/);

    await rm(rig.cancelsBeforeDispatchPath);
    rig.gate = await startGateProcess(rig.fixture, SLOW_AGENT_ENV);
  });

  it('get the usual 404 when the list cannot be written, and the cancel still refuses the dispatch', { timeout: 60_000 }, async () => {
    const rig = await Rig.start();
    // A directory where the list goes: writing the list fails.
    await mkdir(join(rig.cancelsBeforeDispatchPath, 'in-the-way'), { recursive: true });
    await rig.cancelUnseen('xray-run');
    await rig.expectDispatchRefused('xray-run');
    expect(rig.gate.output()).toMatch(/could not write the list of runs cancelled before their dispatch/);
  });
});
