import { describe, expect, it } from 'vitest';
import { whyNothingMoves, type WhyFacts } from '../../capabilities/console/domain/stall-reasons.ts';

/**
 * The rules of why nothing moves (capabilities/console/domain/stall-reasons.ts), for the states the HTTP test
 * (why-nothing-moves.test.ts) does not set up: maintenance, live dispatch off, a read-only store, no worker, a lane
 * another call holds or a replica lacks, and runs starting or finishing.
 */
const facts = (over: Partial<WhyFacts> = {}): WhyFacts => ({
  flags: { queue_paused: false, maintenance_mode: false },
  liveDispatchEnabled: true,
  readOnly: false,
  pumpEnabled: true,
  lanes: [{ lane: 'gpu-a', target: 'gpu-a', active: null, leased: false, notEverywhere: false }],
  preflights: new Map(),
  items: [{ project_id: 'study', project_name: 'Study', manual_review_required: false, route: { ok: true, target: 'gpu-a' } }],
  queuedCount: 1,
  runs: [],
  ...over,
});

describe('why nothing moves, by its rules', () => {
  it('names every switch that stops all dispatch, in order, and the item waits on the first', () => {
    const why = whyNothingMoves(facts({ flags: { queue_paused: true, maintenance_mode: true }, liveDispatchEnabled: false, readOnly: true }));
    expect(why.blockers.map((blocker) => blocker.kind)).toEqual(['maintenance', 'paused', 'live_dispatch_off', 'read_only']);
    expect(why.items[0]).toMatchObject({ kind: 'maintenance', lane: 'gpu-a' });
    expect(why.summary).toMatch(/^Nothing dispatches: maintenance mode is on .*; the queue is paused .*; live dispatch is off .*; the store is read-only/);
  });

  it('says so when no worker target is configured, and when the queue is empty', () => {
    const why = whyNothingMoves(facts({ lanes: [], items: [], queuedCount: 0 }));
    expect(why.blockers).toEqual([{ kind: 'no_worker_target', reason: 'no worker target is configured (set worker_wake_gate_url or worker_targets)' }]);
    expect(why.summary).toBe(
      'Nothing dispatches: no worker target is configured (set worker_wake_gate_url or worker_targets). The queue holds no queued item (promote a candidate to queue one).',
    );
    expect(whyNothingMoves(facts({ items: [], queuedCount: 0 })).summary).toBe('The queue holds no queued item (promote a candidate to queue one).');
  });

  it('tells a lane another dispatch call holds from one a replica lacks', () => {
    const held = whyNothingMoves(facts({ lanes: [{ lane: 'gpu-a', target: 'gpu-a', active: null, leased: true, notEverywhere: false }] }));
    expect(held.items[0]).toMatchObject({ kind: 'lane_held', reason: 'its lane gpu-a: another dispatch call holds it while it starts a run there' });
    expect(held.lanes[0]).toMatchObject({ kind: 'held' });
    expect(held.summary).toBe('No queued item can go now: study waits: its lane gpu-a: another dispatch call holds it while it starts a run there.');
    const lacking = whyNothingMoves(facts({ lanes: [{ lane: 'gpu-a', target: 'gpu-a', active: null, leased: false, notEverywhere: true }] }));
    expect(lacking.items[0]).toMatchObject({ kind: 'lane_not_everywhere' });
  });

  it('says a run is starting, or finishing, from its state; a failing preflight outranks a busy slot', () => {
    const base = { project_id: 'p', lane: 'gpu-a', question: null, usage_limit: null, quiet_window: null };
    const why = whyNothingMoves(facts({
      runs: [
        { ...base, run_id: 'starting', state: 'dispatching' },
        { ...base, run_id: 'finishing', state: 'session_finished_ready' },
      ],
      lanes: [
        { lane: 'gpu-a', target: 'gpu-a', active: { project_id: 'p', run_id: 'starting' }, leased: false, notEverywhere: false },
        { lane: 'gpu-a/2', target: 'gpu-a', active: null, leased: false, notEverywhere: false },
      ],
      preflights: new Map([['gpu-a', { ok: false, failed_checks: ['wake_gate_healthz'], observed_at: '2026-11-29T10:00:00.000Z' }]]),
    }));
    expect(why.runs.map((run) => run.kind)).toEqual(['starting', 'finishing']);
    expect(why.items[0]).toMatchObject({ kind: 'preflight_failing' });
    expect(why.items[0]!.reason).toMatch(/^the latest preflight of gpu-a failed: wake_gate_healthz/);
  });
});
