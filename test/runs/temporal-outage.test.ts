import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Store } from '../../platform/store/store.ts';
import { startRefusingProxy, type Refusal, type RefusingProxy } from '../support/grpc-refusing-proxy.ts';
import { ledgerReads, RUN_STACK_START_MS, startRunStack, type ControlApi, type RunStack } from '../support/run-stack.ts';

// expected duration: ~20 s

/**
 * A Temporal server that is down or restarting, as the control plane meets it (docs/http.md#http-conventions): a real
 * control plane and gate whose Temporal connection goes through a gRPC peer that answers the start of a run with
 * UNAVAILABLE, as a frontend that is going away does. The client tries again for a few seconds, then gives up: the live
 * dispatch is a 503 that says so, not a 500, and nothing is lost. Once the server answers, the same item dispatches.
 */

const START_RUN = '/temporal.api.workflowservice.v1.WorkflowService/ExecuteMultiOperation';

let stack: RunStack;
let store: Store;
let api: ControlApi;
let proxy: RefusingProxy;
/** What the proxy refuses now: emptied when the server "comes back". */
const refusals: Refusal[] = [];
const { queueItem, count } = ledgerReads(() => store);

beforeAll(async () => {
  proxy = await startRefusingProxy(inject('temporalAddress'), refusals);
  stack = await startRunStack({ controlPlaneOverrides: { temporal_address: proxy.address } });
  ({ store, api } = stack);
}, RUN_STACK_START_MS);

afterAll(async () => {
  await stack?.close();
  await proxy?.close();
});

describe('a Temporal server that does not take the start of a run', () => {
  it('answers the live dispatch 503 naming Temporal, keeps the item queued with no run, and dispatches it once the server answers', { timeout: 120_000 }, async () => {
    await stack.seed('outage-1', { projectName: 'Outage 1', scenario: { scenario: 'normal' } });
    refusals.push({ path: START_RUN, code: status.UNAVAILABLE, message: 'the frontend is shutting down' });

    const refused = await api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'outage-test' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    expect(refused.body.detail).toMatch(/^the Temporal server could not be reached \(.*\); call again once it is back$/);
    expect(proxy.refused.length).toBeGreaterThan(0);
    expect((await queueItem('outage-1')).status).toBe('queued');
    expect(await count("SELECT 1 FROM runs WHERE project_id = 'outage-1'")).toBe(0);

    refusals.length = 0;
    const live = await api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'outage-test' });
    expect(live.status, JSON.stringify(live.body)).toBe(200);
    expect(live.body).toMatchObject({ action: 'live_dispatch', candidate: { project_id: 'outage-1' } });
    stack.agents.remember(live.body);
  });
});
