import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_WORKERS, startTestApp, type TestApp } from '../support/app.ts';
import { testPort } from '../support/ports.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';

// expected duration: ~5 s

/**
 * GET /control/api/v1/runs/{run_id}/gate when the gate cannot tell: an unknown run, a run whose lane is not configured
 * here, and a lane whose gate does not answer. (What a live gate answers is exercised end to end by the Prism journey
 * and `rcp runs watch`.)
 */

let t: TestApp;
const RUN_STAMP = '20261127T120000Z';

beforeAll(async () => {
  const deadGate = `http://127.0.0.1:${await testPort()}`;
  const routing = workerRoutingFrom({
    worker_targets: { 'dead-lane': { wake_gate_url: deadGate, bearer_token: 'gate-token-0123456789abcdef0123', role: 'gpu_worker' } },
    workload_machine_targets: {},
  });
  t = await startTestApp({ dispatch: { ...NO_WORKERS, routing } });
  await t.store.transaction(async (tx) => {
    for (const [projectId, lane] of [['on-dead-lane', 'dead-lane'], ['on-unknown-lane', 'gone-lane']] as const) {
      const runId = `${projectId}-${RUN_STAMP}`;
      await insertProject(tx, { project_id: projectId, project_name: projectId, project_dir: projectId, workload_class: 'unknown' });
      await tx.query(
        `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by)
         VALUES ($1, $2, $3, 'running', $4, 'http://127.0.0.1:9', 'unknown', 'test')`,
        [runId, projectId, `run:${runId}`, lane],
      );
    }
  });
});
afterAll(async () => {
  await t?.close();
});

const gateView = (runId: string) => t.app.inject({ method: 'GET', url: `/control/api/v1/runs/${runId}/gate`, headers: t.auth });

describe("a run's gate view", () => {
  it('is 404 for a run the ledger does not hold', async () => {
    const answer = await gateView('no-such-run');
    expect(answer.statusCode).toBe(404);
    expect(answer.json()).toEqual({ detail: "unknown run 'no-such-run'" });
  });

  it("is 409 when the run's lane is not a configured worker target here", async () => {
    const answer = await gateView(`on-unknown-lane-${RUN_STAMP}`);
    expect(answer.statusCode).toBe(409);
    expect(answer.json().detail).toContain("lane 'gone-lane' is not a configured worker target");
  });

  it("is 502, naming the lane, when the run's gate does not answer", async () => {
    const answer = await gateView(`on-dead-lane-${RUN_STAMP}`);
    expect(answer.statusCode).toBe(502);
    expect(answer.json().detail).toMatch(/^the run's worker gate \(lane 'dead-lane'\) did not answer: /);
  });
});
