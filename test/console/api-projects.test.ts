import { AGENT_DEFAULTS } from '../../capabilities/runs/dispatch-settings.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { recordLineage } from '../../capabilities/research/research-lineage.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { insertWorkerObservation } from '../../capabilities/runs/worker-observations.ts';
import { startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';

let t: TestApp;

const OLD_RUN = 'alpha-20250101T100000Z';
const NEW_RUN = 'alpha-20250102T100000Z';
// A project whose id has "alpha" as a prefix: nothing of it may leak into alpha's detail.
const OTHER_RUN = 'alpha-beta-20250103T100000Z';

const ids = (rows: { id?: number; observation_id?: number }[]) => rows.map((row) => row.id ?? row.observation_id);

async function insertRun(tx: Queryable, runId: string, projectId: string, createdAt: string, extra: { state: string; evidence?: object; finished_at?: string }) {
  await tx.query(
    `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by,
       evidence, prepare_result, finished_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'gpu-box', 'http://gpu-box:8790', 'gpu_required', 'operator', $5::jsonb, $6::jsonb, $7, $8, $8)`,
    [runId, projectId, `run:${runId}`, extra.state, extra.evidence ? JSON.stringify(extra.evidence) : null,
      JSON.stringify({ ok: true, files: ['prompt.md'] }), extra.finished_at ?? null, createdAt],
  );
}

async function insertTransition(tx: Queryable, runId: string, transition: string, from: string | null, to: string, queueStatus: string | null, at: string) {
  await tx.query(
    `INSERT INTO run_transitions (run_id, transition, from_state, to_state, queue_status, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
    [runId, transition, from, to, queueStatus, at],
  );
}

const seeded = { events: {} as Record<string, number>, observations: {} as Record<string, number> };

beforeAll(async () => {
  t = await startTestApp({
    dispatch: {
      liveDispatchEnabled: false,
      routing: workerRoutingFrom({
        worker_targets: {
          'gpu-box': { wake_gate_url: 'http://gpu-box:8790', bearer_token: 'gpu-token', role: 'gpu_worker' },
          'cpu-box': { wake_gate_url: 'http://cpu-box:8790', bearer_token: 'cpu-token', role: 'cpu_worker' },
        },
        workload_machine_targets: { cpu_only: 'cpu-box' },
      }),
      completionCallbackToken: 'test-callback-token-0123456789ab',
      dispatchTimeoutSec: 30,
      maxWaitAfterIdleSec: 3600,
      agent: AGENT_DEFAULTS,
    },
  });
  await t.store.transaction(async (tx) => {
    await insertProject(tx, { project_id: 'alpha', project_name: 'Alpha', project_dir: 'alpha', workload_class: 'gpu_required' });
    await insertQueueItem(tx, { project_id: 'alpha', project_name: 'Alpha', workload_class: 'gpu_required' });
    // An active row needs its lane; the claim sets both at once.
    await tx.query(`UPDATE queue_items SET status = 'running', lane = 'gpu-box', current_run_id = $1, last_run_state = 'running' WHERE project_id = 'alpha'`, [NEW_RUN]);
    await insertProject(tx, { project_id: 'alpha-beta', project_name: 'Alpha Beta', project_dir: 'alpha-beta', workload_class: 'cpu_only' });
    await insertQueueItem(tx, { project_id: 'alpha-beta', project_name: 'Alpha Beta', workload_class: 'cpu_only' });
    await insertProject(tx, { project_id: 'lonely', project_name: 'Lonely', project_dir: 'lonely' });

    await insertRun(tx, OLD_RUN, 'alpha', '2025-01-01T10:00:00.000Z', {
      state: 'reconciled',
      evidence: { decision: 'negative', files: ['run_notes.md'] },
      finished_at: '2025-01-01T12:00:00.000Z',
    });
    await insertRun(tx, NEW_RUN, 'alpha', '2025-01-02T10:00:00.000Z', { state: 'running' });
    await insertRun(tx, OTHER_RUN, 'alpha-beta', '2025-01-03T10:00:00.000Z', { state: 'prepared' });
    // Inserted out of order: the detail lists them in the order they were applied.
    await insertTransition(tx, OLD_RUN, 'worker_accepted', 'prepared', 'awaiting_wake', 'awaiting_wake', '2025-01-01T10:01:00.000Z');
    await insertTransition(tx, OLD_RUN, 'prepared', null, 'prepared', 'dispatching', '2025-01-01T10:00:00.000Z');
    await insertTransition(tx, OLD_RUN, 'completed', 'wake_ready', 'reconciled', 'completed', '2025-01-01T12:00:00.000Z');
    await insertTransition(tx, NEW_RUN, 'prepared', null, 'prepared', 'dispatching', '2025-01-02T10:00:00.000Z');
    await insertTransition(tx, OTHER_RUN, 'prepared', null, 'prepared', 'dispatching', '2025-01-03T10:00:00.000Z');

    const event = async (name: string, entityId: string, payload: Record<string, unknown> = {}) => {
      seeded.events[name] = (await appendAuditEvent(tx, { entity_type: 'x', entity_id: entityId, event_type: `x.${name}`, payload })).id;
    };
    await event('project_created', 'alpha');
    await event('old_run', OLD_RUN);
    await event('other_project', 'alpha-beta', { about: 'alpha' });
    await event('other_run', OTHER_RUN);
    await event('new_run', NEW_RUN);
    await event('queue_requeued', 'alpha');

    const observe = async (name: string, target: string, runId: string | null) => {
      const checks = [{ name: 'wake_gate_healthz' as const, ok: true, detail: 'ok', data: {} }];
      seeded.observations[name] = (
        await insertWorkerObservation(tx, { target, wake_gate_url: `http://${target}:8790`, ok: true, summary: name, checks, run_id: runId })
      ).observation_id;
    };
    await observe('old_run', 'gpu-box', OLD_RUN);
    await observe('cpu_lane', 'cpu-box', null);
    await observe('gpu_lane', 'gpu-box', null);
    await observe('other_run', 'cpu-box', OTHER_RUN);
    await observe('new_run', 'gpu-box', NEW_RUN);

    await recordLineage(tx, { from_kind: 'candidate', from_id: 'cand-alpha', to_kind: 'project', to_id: 'alpha', relation: 'promoted_to' });
    await recordLineage(tx, { from_kind: 'project', from_id: 'alpha', to_kind: 'run', to_id: NEW_RUN, relation: 'ran' });
    await recordLineage(tx, { from_kind: 'candidate', from_id: 'cand-beta', to_kind: 'project', to_id: 'alpha-beta', relation: 'promoted_to' });
  });
});
afterAll(async () => t.close());

const get = async (url: string, headers: Record<string, string> = t.auth) => {
  const response = await t.app.inject({ method: 'GET', url, headers });
  return { status: response.statusCode, body: response.json() as Record<string, any>, headers: response.headers };
};

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe('GET /control/api/projects/{project_id}', () => {
  it('returns the project, its queue row, runs with transitions, events, observations and lineage', async () => {
    const { status, body } = await get('/control/api/projects/alpha');
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['events', 'lineage', 'papers', 'project', 'queue_item', 'runs', 'worker_observations']);
    expect(body.project).toEqual({
      project_id: 'alpha',
      project_name: 'Alpha',
      project_dir: 'alpha',
      idea_id: null,
      candidate_id: null,
      workload_class: 'gpu_required',
      machine_target: null,
      created_at: ISO,
      updated_at: ISO,
    });
    expect(body.queue_item).toEqual({
      project_id: 'alpha',
      project_name: 'Alpha',
      status: 'running',
      manual_review_required: false,
      dispatch_priority: 50,
      selection_rank: 50,
      machine_target: null,
      workload_class: 'gpu_required',
      current_run_id: NEW_RUN,
      last_run_state: 'running',
      next_action_hint: null,
      last_error: null,
      candidate_id: null,
      lane: 'gpu-box',
      dispatch_failures: 0,
      gpu_count: null,
      gpu_memory_mib: null,
      cpu_count: null,
      created_at: ISO,
      updated_at: ISO,
    });
    expect(body.papers).toEqual([]);

    expect(body.runs).toEqual([
      {
        run_id: NEW_RUN,
        project_id: 'alpha',
        workflow_id: `run:${NEW_RUN}`,
        state: 'running',
        lane: 'gpu-box',
        wake_gate_url: 'http://gpu-box:8790',
        workload_class: 'gpu_required',
        requested_by: 'operator',
        session_id: null,
        question: null,
        question_detail: null,
        usage_limit: null,
        decision: null,
        decision_summary: null,
        evidence: null,
        prepare_result: { ok: true, files: ['prompt.md'] },
        dispatch_result: null,
        last_error: null,
        finished_at: null,
        gpu_indices: null,
        cpu_count: null,
        created_at: '2025-01-02T10:00:00.000Z',
        updated_at: '2025-01-02T10:00:00.000Z',
        transitions: [
          { transition: 'prepared', from_state: null, to_state: 'prepared', queue_status: 'dispatching', created_at: '2025-01-02T10:00:00.000Z' },
        ],
      },
      expect.objectContaining({
        run_id: OLD_RUN,
        state: 'reconciled',
        evidence: { decision: 'negative', files: ['run_notes.md'] },
        finished_at: '2025-01-01T12:00:00.000Z',
        created_at: '2025-01-01T10:00:00.000Z',
      }),
    ]);
    expect(body.runs[1].transitions).toEqual([
      { transition: 'prepared', from_state: null, to_state: 'prepared', queue_status: 'dispatching', created_at: '2025-01-01T10:00:00.000Z' },
      { transition: 'worker_accepted', from_state: 'prepared', to_state: 'awaiting_wake', queue_status: 'awaiting_wake', created_at: '2025-01-01T10:01:00.000Z' },
      { transition: 'completed', from_state: 'wake_ready', to_state: 'reconciled', queue_status: 'completed', created_at: '2025-01-01T12:00:00.000Z' },
    ]);

    expect(ids(body.events)).toEqual([seeded.events.queue_requeued, seeded.events.new_run, seeded.events.old_run, seeded.events.project_created]);
    expect(body.events[0]).toEqual({
      id: seeded.events.queue_requeued,
      entity_type: 'x',
      entity_id: 'alpha',
      event_type: 'x.queue_requeued',
      payload: {},
      idempotency_key: null,
      actor: null,
      request_id: null,
      created_at: ISO,
    });

    // Its runs' observations and those of its lane (gpu-box), newest first; never another lane's.
    expect(ids(body.worker_observations)).toEqual([seeded.observations.new_run, seeded.observations.gpu_lane, seeded.observations.old_run]);
    expect(body.worker_observations[0]).toEqual({
      observation_id: seeded.observations.new_run,
      target: 'gpu-box',
      wake_gate_url: 'http://gpu-box:8790',
      ok: true,
      summary: 'new_run',
      checks: [{ name: 'wake_gate_healthz', ok: true, detail: 'ok', data: {} }],
      run_id: NEW_RUN,
      observed_at: ISO,
    });

    expect(body.lineage.map((link: Record<string, string>) => [link.from_id, link.relation, link.to_id])).toEqual([
      ['cand-alpha', 'promoted_to', 'alpha'],
      ['alpha', 'ran', NEW_RUN],
    ]);
  });

  it('never includes events, runs or observations of another project, even one whose id extends this one', async () => {
    const { body } = await get('/control/api/projects/alpha-beta');
    expect(body.runs.map((run: { run_id: string }) => run.run_id)).toEqual([OTHER_RUN]);
    expect(ids(body.events)).toEqual([seeded.events.other_run, seeded.events.other_project]);
    // The queue row was never claimed: its lane comes from routing (cpu_only → cpu-box).
    expect(ids(body.worker_observations)).toEqual([seeded.observations.other_run, seeded.observations.cpu_lane]);
    expect(body.lineage).toHaveLength(1);

    const alpha = await get('/control/api/projects/alpha?event_limit=200');
    const alphaEventIds = ids(alpha.body.events);
    expect(alphaEventIds).not.toContain(seeded.events.other_run);
    expect(alphaEventIds).not.toContain(seeded.events.other_project);
    expect(alpha.body.runs.map((run: { run_id: string }) => run.run_id)).not.toContain(OTHER_RUN);
  });

  it('limits events to the newest event_limit', async () => {
    const one = await get('/control/api/projects/alpha?event_limit=1');
    expect(one.status).toBe(200);
    expect(ids(one.body.events)).toEqual([seeded.events.queue_requeued]);
    const two = await get('/control/api/projects/alpha?event_limit=2');
    expect(ids(two.body.events)).toEqual([seeded.events.queue_requeued, seeded.events.new_run]);
    expect((await get('/control/api/projects/alpha?event_limit=200')).body.events).toHaveLength(4);
    expect((await get('/control/api/projects/alpha?event_limit=')).body.events).toHaveLength(4);
  });

  it.each([
    ['event_limit=0', ['query', 'event_limit']],
    ['event_limit=201', ['query', 'event_limit']],
    ['event_limit=ten', ['query', 'event_limit']],
    ['event_limit=2.5', ['query', 'event_limit']],
    ['events=5', ['query', 'events']],
  ])('refuses ?%s with 422', async (query, loc) => {
    const { status, body } = await get(`/control/api/projects/alpha?${query}`);
    expect(status).toBe(422);
    expect(body.detail).toEqual([expect.objectContaining({ loc, msg: expect.any(String), type: expect.any(String) })]);
  });

  it('refuses a project_id over 200 characters with 422 and answers 404 for an unknown one at the limit', async () => {
    const tooLong = await get(`/control/api/projects/${'p'.repeat(201)}`);
    expect(tooLong.status).toBe(422);
    expect(tooLong.body.detail).toEqual([expect.objectContaining({ loc: ['path', 'project_id'] })]);
    const atLimit = await get(`/control/api/projects/${'p'.repeat(200)}`);
    expect(atLimit.status).toBe(404);
    expect(atLimit.body).toEqual({ detail: `unknown project '${'p'.repeat(200)}'` });
  });

  it('refuses an empty project_id', async () => {
    const empty = await get('/control/api/projects/');
    expect(empty.status).toBe(422);
    expect(empty.body.detail).toEqual([expect.objectContaining({ loc: ['path', 'project_id'] })]);
  });

  it('shows a project without a queue item', async () => {
    const { status, body } = await get('/control/api/projects/lonely');
    expect(status).toBe(200);
    expect(body).toEqual({
      project: expect.objectContaining({ project_id: 'lonely', project_name: 'Lonely', project_dir: 'lonely' }),
      queue_item: null,
      runs: [],
      papers: [],
      events: [],
      worker_observations: [],
      lineage: [],
    });
  });

  it('answers 404 with the exact body for an unknown project', async () => {
    const { status, body } = await get('/control/api/projects/nope');
    expect(status).toBe(404);
    expect(body).toEqual({ detail: "unknown project 'nope'" });
    const encoded = await get(`/control/api/projects/${encodeURIComponent("it's odd")}`);
    expect(encoded.status).toBe(404);
    expect(encoded.body).toEqual({ detail: "unknown project 'it's odd'" });
  });

  it('answers 401 without a valid bearer token, also for an unknown project', async () => {
    for (const url of ['/control/api/projects/alpha', '/control/api/projects/nope', `/control/api/projects/alpha?token=${TEST_TOKEN}`]) {
      const { status, body, headers } = await get(url, {});
      expect(status).toBe(401);
      expect(body).toEqual({ detail: 'invalid bearer token' });
      expect(headers['www-authenticate']).toBe('Bearer');
    }
    expect((await get('/control/api/projects/alpha', { authorization: 'Bearer wrong-token' })).status).toBe(401);
  });
});
