import { describe, expect, it } from 'vitest';
import {
  assessDispatchSafety,
  WORKER_STALE_AFTER_SEC,
  workerFreshness,
  type DispatchSafetyInput,
  type LatestObservation,
  type QueuedGroup,
} from '../../capabilities/runs/domain/dispatch-safety.ts';
import { workerRoutingFrom, type WorkerRouting } from '../../capabilities/runs/domain/worker-lanes.ts';

const NOW = new Date('2030-01-01T12:00:00.000Z');
const secondsAgo = (sec: number) => new Date(NOW.getTime() - sec * 1000).toISOString();

const routing = (): WorkerRouting =>
  workerRoutingFrom({
    worker_wake_gate_url: 'http://gpu.test:8790',
    worker_wake_gate_bearer_token: 'secret-a',
    worker_targets: { cpu: { wake_gate_url: 'http://cpu.test:8790', bearer_token: 'secret-b', role: 'cpu_worker' } },
    workload_machine_targets: { cpu_only: 'cpu' },
  });

const healthy = (target: string, sec = 10): LatestObservation => ({
  target,
  ok: true,
  observed_at: secondsAgo(sec),
  checks: [{ name: 'wake_gate_healthz', ok: true }],
});

const group = (overrides: Partial<QueuedGroup> = {}): QueuedGroup => ({
  machine_target: null,
  workload_class: 'unknown',
  manual_review_required: false,
  count: 1,
  sample_project_ids: ['p1'],
  ...overrides,
});

/** A safe baseline: live, unpaused, both workers freshly observed and healthy, an empty queue. */
function input(overrides: Partial<DispatchSafetyInput> = {}): DispatchSafetyInput {
  return {
    now: NOW,
    liveDispatchEnabled: true,
    flags: { queue_paused: false, maintenance_mode: false, paused_by: null, pause_reason: null, maintenance_by: null },
    routing: routing(),
    observations: [healthy('default'), healthy('cpu')],
    attention: { by_status: {}, flagged_elsewhere: 0 },
    activeItems: [],
    queuedGroups: [],
    ...overrides,
  };
}

describe('assessDispatchSafety', () => {
  it('is safe with no blockers, conflicts or warnings', () => {
    const safety = assessDispatchSafety(input());
    expect(safety).toMatchObject({ dispatch_safe: true, dispatch_blockers: [], warnings: [], conflicts: [], dispatchable_count: 0 });
  });

  it('blocks when live dispatch is disabled, the queue is paused (with who and why) or maintenance is on', () => {
    const safety = assessDispatchSafety(
      input({
        liveDispatchEnabled: false,
        flags: { queue_paused: true, maintenance_mode: true, paused_by: 'ops', pause_reason: 'driver upgrade', maintenance_by: 'ops' },
      }),
    );
    expect(safety.dispatch_safe).toBe(false);
    expect(safety.dispatch_blockers).toEqual([
      'live dispatch is disabled (live_dispatch_enabled is false)',
      'queue is paused by ops: driver upgrade',
      'maintenance mode is on (set by ops)',
    ]);
  });

  it('says only "queue is paused" when nobody and no reason was recorded', () => {
    const safety = assessDispatchSafety(
      input({ flags: { queue_paused: true, maintenance_mode: false, paused_by: null, pause_reason: null, maintenance_by: null } }),
    );
    expect(safety.dispatch_blockers).toEqual(['queue is paused']);
  });

  it('blocks when no worker target is configured, without per-worker warnings', () => {
    const safety = assessDispatchSafety(input({ routing: workerRoutingFrom({ worker_targets: {}, workload_machine_targets: {} }), observations: [] }));
    expect(safety.dispatch_blockers).toEqual([expect.stringMatching(/^no worker target is configured/)]);
    expect(safety.worker_freshness).toEqual([]);
    expect(safety.warnings).toEqual([]);
  });

  it('blocks on a failed latest observation and names the failing checks', () => {
    const failed: LatestObservation = {
      target: 'cpu',
      ok: false,
      observed_at: secondsAgo(30),
      checks: [
        { name: 'wake_gate_healthz', ok: false },
        { name: 'wake_gate_dashboard_api', ok: false },
        { name: 'control_maintenance_mode', ok: true },
      ],
    };
    const safety = assessDispatchSafety(input({ observations: [healthy('default'), failed] }));
    expect(safety.dispatch_safe).toBe(false);
    expect(safety.dispatch_blockers).toEqual([
      `worker 'cpu' failed its latest preflight (${failed.observed_at}): wake_gate_healthz, wake_gate_dashboard_api`,
    ]);
  });

  it('does not block on an ok observation whose optional checks failed', () => {
    const busy: LatestObservation = { ...healthy('cpu'), checks: [{ name: 'wake_gate_healthz', ok: true }, { name: 'worker_gpu_idle', ok: false }] };
    expect(assessDispatchSafety(input({ observations: [healthy('default'), busy] })).dispatch_safe).toBe(true);
  });

  it('ignores observations of targets no longer configured', () => {
    const gone: LatestObservation = { target: 'retired', ok: false, observed_at: secondsAgo(5), checks: [] };
    const safety = assessDispatchSafety(input({ observations: [healthy('default'), healthy('cpu'), gone] }));
    expect(safety.dispatch_safe).toBe(true);
    expect(safety.worker_freshness.map((entry) => entry.target)).toEqual(['default', 'cpu']);
  });

  it('warns about never-observed and stale workers without blocking', () => {
    const safety = assessDispatchSafety(input({ observations: [healthy('default', WORKER_STALE_AFTER_SEC + 60)] }));
    expect(safety.dispatch_safe).toBe(true);
    expect(safety.warnings).toEqual([
      expect.objectContaining({ severity: 'warning', source: 'worker:default', message: expect.stringContaining(`last observed ${WORKER_STALE_AFTER_SEC + 60} s ago`) }),
      expect.objectContaining({ severity: 'warning', source: 'worker:cpu', message: "worker 'cpu' has never been observed" }),
    ]);
    for (const warning of safety.warnings) expect(warning.suggested_action).toMatch(/refresh_worker=true/);
  });

  it('reports active items without a run, with a missing run row, or with a finished run as critical conflicts', () => {
    const safety = assessDispatchSafety(
      input({
        activeItems: [
          { project_id: 'no-run', status: 'running', lane: 'default', current_run_id: null, run: null },
          { project_id: 'lost-run', status: 'awaiting_wake', lane: 'cpu', current_run_id: 'lost-run-20300101T000000Z', run: null },
          {
            project_id: 'done-run',
            status: 'wake_received',
            lane: 'other',
            current_run_id: 'done-run-20300101T000000Z',
            run: { run_id: 'done-run-20300101T000000Z', state: 'canceled' },
          },
          {
            project_id: 'fine',
            status: 'running',
            lane: 'fourth',
            current_run_id: 'fine-20300101T000000Z',
            run: { run_id: 'fine-20300101T000000Z', state: 'running' },
          },
        ],
      }),
    );
    expect(safety.dispatch_safe).toBe(false);
    expect(safety.dispatch_blockers).toEqual([]);
    expect(safety.conflicts).toEqual([
      expect.objectContaining({ severity: 'critical', source: 'queue_item:no-run', message: expect.stringContaining('has no current run') }),
      expect.objectContaining({
        severity: 'critical',
        source: 'queue_item:lost-run',
        message: expect.stringContaining('has no run record'),
        suggested_action: expect.stringContaining('/control/api/runs/lost-run-20300101T000000Z/cancel'),
      }),
      expect.objectContaining({
        severity: 'critical',
        source: 'run:done-run-20300101T000000Z',
        message: expect.stringContaining('finished as canceled'),
        suggested_action: expect.stringContaining('POST /control/queue/requeue'),
      }),
    ]);
  });

  it('treats wake_ready and session_finished_ready runs as still in flight', () => {
    const safety = assessDispatchSafety(
      input({
        activeItems: [
          { project_id: 'a', status: 'wake_received', lane: 'default', current_run_id: 'a-20300101T000000Z', run: { run_id: 'a-20300101T000000Z', state: 'wake_ready' } },
          { project_id: 'b', status: 'reconciling', lane: 'cpu', current_run_id: 'b-20300101T000000Z', run: { run_id: 'b-20300101T000000Z', state: 'session_finished_ready' } },
        ],
      }),
    );
    expect(safety.conflicts).toEqual([]);
  });

  it('groups queued items whose lane cannot be resolved into one warning conflict per reason', () => {
    const safety = assessDispatchSafety(
      input({
        queuedGroups: [
          group({ machine_target: 'nowhere', count: 7, sample_project_ids: ['n1', 'n2', 'n3', 'n4', 'n5'] }),
          group({ machine_target: 'nowhere', workload_class: 'training', manual_review_required: true, count: 1, sample_project_ids: ['n0'] }),
          group({ count: 2, sample_project_ids: ['ok1', 'ok2'] }),
        ],
      }),
    );
    expect(safety.dispatch_safe).toBe(true);
    expect(safety.conflicts).toEqual([
      {
        severity: 'warning',
        source: 'queue',
        message: '8 queued items have no lane: machine_target "nowhere" is not a configured worker target (n0, n1, n2, n3, n4, …)',
        suggested_action: expect.any(String),
      },
    ]);
    expect(safety.dispatchable_count).toBe(2);
  });

  it('reports unroutable workload classes when there is no default worker', () => {
    const noDefault = workerRoutingFrom({
      worker_targets: { cpu: { wake_gate_url: 'http://cpu.test:8790', bearer_token: 'x', role: 'cpu_worker' } },
      workload_machine_targets: { cpu_only: 'cpu' },
    });
    const safety = assessDispatchSafety(
      input({ routing: noDefault, observations: [healthy('cpu')], queuedGroups: [group({ workload_class: 'training', sample_project_ids: ['t1'] }), group({ workload_class: 'cpu_only', sample_project_ids: ['c1'] })] }),
    );
    expect(safety.conflicts).toEqual([
      expect.objectContaining({ message: expect.stringMatching(/^1 queued item has no lane: no worker target for workload class training/) }),
    ]);
    expect(safety.dispatchable_count).toBe(1);
  });

  it('counts items needing attention in one warning, including flagged rows in other statuses', () => {
    const safety = assessDispatchSafety(
      input({ attention: { by_status: { blocked: 2, needs_review: 1, dispatch_error: 0 }, flagged_elsewhere: 3 } }),
    );
    expect(safety.warnings).toEqual([
      expect.objectContaining({ severity: 'warning', source: 'queue', message: '6 queue items need attention (blocked 2, needs_review 1, manual_review_required 3)' }),
    ]);
    expect(safety.dispatch_safe).toBe(true);
  });

  it('warns when queued items exist but none is dispatchable: flagged, or every lane busy', () => {
    const busy = assessDispatchSafety(
      input({
        activeItems: [
          { project_id: 'a', status: 'running', lane: 'default', current_run_id: 'a-20300101T000000Z', run: { run_id: 'a-20300101T000000Z', state: 'running' } },
        ],
        queuedGroups: [group({ count: 2 }), group({ workload_class: 'cpu_only', manual_review_required: true })],
      }),
    );
    expect(busy.dispatchable_count).toBe(0);
    expect(busy.warnings).toEqual([expect.objectContaining({ message: expect.stringMatching(/^3 queued items but none is dispatchable/) })]);

    const free = assessDispatchSafety(input({ queuedGroups: [group({ workload_class: 'cpu_only' })] }));
    expect(free.dispatchable_count).toBe(1);
    expect(free.warnings).toEqual([]);
  });
});

describe('workerFreshness', () => {
  it('gives each configured target its age, staleness and verdict, stale at more than 15 minutes', () => {
    const targets = [...routing().targets.values()];
    const fresh = workerFreshness(targets, [healthy('default', WORKER_STALE_AFTER_SEC)], NOW);
    expect(fresh).toEqual([
      { source: 'worker:default', target: 'default', observed_at: secondsAgo(WORKER_STALE_AFTER_SEC), age_sec: WORKER_STALE_AFTER_SEC, stale: false, ok: true },
      { source: 'worker:cpu', target: 'cpu', observed_at: null, age_sec: null, stale: true, ok: null },
    ]);
    expect(workerFreshness(targets, [healthy('default', WORKER_STALE_AFTER_SEC + 1)], NOW)[0]!.stale).toBe(true);
  });

  it('never reports a negative age for a clock slightly ahead', () => {
    const [entry] = workerFreshness([...routing().targets.values()], [healthy('default', -3)], NOW);
    expect(entry!.age_sec).toBe(0);
  });
});
