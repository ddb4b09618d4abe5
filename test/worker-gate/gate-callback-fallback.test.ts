import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackReceiver, gateClient, startGateProcess, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';

// expected duration: ~15 s

/**
 * A worker gate that knows every control-plane replica (completion_callback_fallback_urls): a callback the configured
 * replica does not take goes to the next one at once, not after a retry's backoff, and the next callback starts with
 * the replica that took the last one. Each replica here is a real HTTP receiver that can be taken down and up.
 */

let primary: CallbackReceiver;
let fallback: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;
/** The agents' process groups: the test ends while they still work, and they outlive the gate. */
const agentGroups: number[] = [];

beforeAll(async () => {
  primary = await CallbackReceiver.start();
  fallback = await CallbackReceiver.start();
  // A receiver that is down refuses at once; the long timeout keeps a slow answer of this (loaded) test process from
  // counting as a failure and sending the callback to the other replica too.
  fixture = await writeGateConfig({ callbackUrl: primary.url, overrides: { completion_callback_fallback_urls: [fallback.url], completion_callback_timeout_sec: 30, run_slots: 4 } });
  gate = await startGateProcess(fixture);
  client = gateClient(fixture);
});

afterAll(async () => {
  for (const group of agentGroups) {
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // Finished already.
    }
  }
  await gate?.kill('SIGTERM');
  await primary?.down();
  await fallback?.down();
  if (fixture) await rm(fixture.dir, { recursive: true, force: true, maxRetries: 5 });
});

async function launched(runId: string) {
  const answer = await client.launch(runId, 'normal');
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  agentGroups.push(Number(answer.body.process_group_id ?? answer.body.root_pid));
}

describe('callbacks to several control-plane replicas', () => {
  it('go to the next replica at once while one is down, stay with the replica that took the last one, and move back when it is down', { timeout: 90_000 }, async () => {
    expect((await client.dashboard()).body.service).toMatchObject({ completion_callback_url: primary.url, completion_callback_fallback_urls: [fallback.url] });

    await primary.down();
    await launched('fallback-1-run');
    await fallback.waitFor('fallback-1-run', 'session_started', 20_000);
    expect(primary.forRun('fallback-1-run')).toEqual([]);

    await primary.up();
    await launched('fallback-2-run');
    await fallback.waitFor('fallback-2-run', 'session_started', 20_000);
    expect(primary.received).toEqual([]);

    await fallback.down();
    await launched('fallback-3-run');
    await primary.waitFor('fallback-3-run', 'session_started', 20_000);
    // One attempt each: the replica that was down cost no retry (the outbox's next would come a second later or more).
    const callbacks = (await client.dashboard()).body.callbacks as { run_id: string; event_type: string; attempts: number; delivered_at: string | null }[];
    const started = callbacks.filter((entry) => entry.event_type === 'session_started').map(({ run_id, attempts, delivered_at }) => ({ run_id, attempts, delivered: delivered_at !== null }));
    expect(started.sort((a, b) => a.run_id.localeCompare(b.run_id))).toEqual(['fallback-1-run', 'fallback-2-run', 'fallback-3-run'].map((run_id) => ({ run_id, attempts: 1, delivered: true })));
  });
});
