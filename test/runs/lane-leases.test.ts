import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leasedLanes, releaseLaneLease, renewLaneLease, takeLaneLease } from '../../capabilities/runs/store/lane-leases.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

/**
 * Lane leases (capabilities/runs/store/lane-leases.ts) in Postgres, as control-plane replicas share them: a live dispatch-next call
 * takes a short lease and renews it while it waits, so a call whose replica died frees its lane within seconds.
 */

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});

afterAll(async () => {
  await t?.close();
});

const TTL_MS = 4_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('lane leases', () => {
  it('keep a lane from other callers while renewed, and free it once the holder stops renewing (its process died)', async () => {
    expect(await takeLaneLease(t.store, 'gpu-a', 'call-1', TTL_MS)).toBe(true);
    expect(await takeLaneLease(t.store, 'gpu-a', 'call-2', TTL_MS)).toBe(false);
    for (let tick = 0; tick < 5; tick++) {
      await sleep(1_000);
      expect(await renewLaneLease(t.store, 'gpu-a', 'call-1', TTL_MS)).toBe(true);
    }
    // 5 s after it was taken, past its lifetime: still held, since it was renewed.
    expect(await takeLaneLease(t.store, 'gpu-a', 'call-2', TTL_MS)).toBe(false);
    expect(await leasedLanes(t.store)).toEqual(new Set(['gpu-a']));

    await sleep(TTL_MS + 300);
    expect(await leasedLanes(t.store)).toEqual(new Set());
    expect(await takeLaneLease(t.store, 'gpu-a', 'call-2', TTL_MS)).toBe(true);
    // The first holder's renewal no longer takes it back, nor does its release free it.
    expect(await renewLaneLease(t.store, 'gpu-a', 'call-1', TTL_MS)).toBe(false);
    await releaseLaneLease(t.store, 'gpu-a', 'call-1');
    expect(await leasedLanes(t.store)).toEqual(new Set(['gpu-a']));
    await releaseLaneLease(t.store, 'gpu-a', 'call-2');
    expect(await leasedLanes(t.store)).toEqual(new Set());
  });
});
