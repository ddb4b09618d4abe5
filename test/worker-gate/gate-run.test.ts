import { describe, expect, it } from 'vitest';
import {
  adoptRoot,
  applyRunEvent,
  markCancelled,
  markDispatched,
  markDispatchInterrupted,
  recordCallback,
  recordCancelStops,
  recordReaped,
  startingRun,
  type GateRun,
} from '../../worker-gate/domain/gate-run.ts';
import { activeRunIn, findRunForEvent } from '../../worker-gate/domain/gate-run-lookup.ts';
import {
  detectSilentExit,
  isWatched,
  observeProcesses,
  settleQuietWindow,
} from '../../worker-gate/domain/gate-run-watch.ts';
import type { QuietWindowMetrics, QuietWindowVerdict } from '../../worker-gate/domain/quiet-window.ts';

const at = (second: number) => new Date(Date.UTC(2026, 10, 22, 12, 0, second)).toISOString();
const ms = (second: number) => Date.parse(at(second));

function run(overrides: Partial<GateRun> = {}): GateRun {
  return {
    ...startingRun(
      {
        run_id: 'run-1',
        project_id: 'proj-1',
        project_name: 'Project one',
        project_dir: '/srv/projects/proj-1',
        prompt_file: '/srv/projects/proj-1/prompt.md',
        workload_class: 'training',
        machine_target: null,
        mode: 'exec',
        model: 'model-a',
        reasoning_effort: 'high',
        sandbox: 'workspace-write',
        request_hash: 'hash-1',
        vram_baseline_mib: 512,
      },
      at(0),
    ),
    ...overrides,
  };
}

/** A run whose agent was started and reported idle at second 10. */
const idleRun = (overrides: Partial<GateRun> = {}) =>
  run({ dispatch_status: 'started', gate_state: 'pending_idle_gate', last_event: 'session-idle', idle_seen_at: at(10), ...overrides });

const METRICS: QuietWindowMetrics = {
  samples_needed: 3,
  samples_in_window: 3,
  mean_cpu_pct: 1.5,
  mean_gpu_pct: null,
  peak_gpu_pct: null,
  vram_delta_mib: null,
  gpu_present: false,
  window_started_at_ms: ms(10),
};
const verdict = (kind: QuietWindowVerdict['verdict'], reasons: string[] = []): QuietWindowVerdict => ({ verdict: kind, reasons, metrics: METRICS });
const LIMITS = { idleSustainSec: 30, maxWaitAfterIdleSec: 600 };

describe('dispatching a run', () => {
  it('starts as a running record whose dispatch script has not answered yet', () => {
    expect(run()).toMatchObject({
      dispatch_status: 'starting',
      gate_state: 'running',
      dispatched_at: at(0),
      created_at: at(0),
      updated_at: at(0),
      vram_baseline_mib: 512,
      root_pid: null,
      known_pids: [],
      callbacks: [],
      events_received: 0,
    });
  });

  it('takes the root the script reported, with its start time, so a reused pid is never mistaken for it', () => {
    const before = run();
    const dispatched = markDispatched(
      before,
      { script_output: { root_pid: 4242, extra: 'x' }, duration_ms: 35, root_pid: 4242, process_group_id: 4242, tmux_session: 'agent-1' },
      { pid: 4242, startTicks: 9001 },
    );
    expect(dispatched).toMatchObject({
      dispatch_status: 'started',
      dispatch_duration_ms: 35,
      script_output: { root_pid: 4242, extra: 'x' },
      root_pid: 4242,
      root_start_ticks: 9001,
      process_group_id: 4242,
      tmux_session: 'agent-1',
      known_pids: [{ pid: 4242, startTicks: 9001 }],
    });
    expect(before.dispatch_status).toBe('starting');
    expect(before.known_pids).toEqual([]);
  });

  it('keeps the root pid without a start time when the root has already exited', () => {
    const dispatched = markDispatched(run(), { script_output: {}, duration_ms: 5, root_pid: 77, process_group_id: null, tmux_session: null }, null);
    expect(dispatched).toMatchObject({ root_pid: 77, root_start_ticks: null, known_pids: [] });
  });

  it('tracks no root when the script reported none', () => {
    const dispatched = markDispatched(run(), { script_output: {}, duration_ms: 5, root_pid: null, process_group_id: 88, tmux_session: null }, null);
    expect(dispatched).toMatchObject({ dispatch_status: 'started', root_pid: null, process_group_id: 88, known_pids: [] });
  });

  it('keeps a run whose dispatch was interrupted in error, never to be started again', () => {
    const interrupted = markDispatchInterrupted(run());
    expect(interrupted).toMatchObject({ dispatch_status: 'interrupted', gate_state: 'error' });
    expect(interrupted.gate_reason).toMatch(/may or may not have started/);
    expect(isWatched(interrupted)).toBe(false);
  });
});

describe('cancelling a run', () => {
  it('settles the run as cancelled, then records the processes it stopped and counts none alive', () => {
    const cancelled = markCancelled(idleRun({ alive_pids: [10, 11], processes_alive: true }));
    expect(cancelled).toMatchObject({ gate_state: 'cancelled', gate_reason: 'cancelled by the control plane' });
    expect(isWatched(cancelled)).toBe(false);

    const stopped = recordCancelStops(cancelled, [{ pid: 10, outcome: 'terminated' }, { pid: 11, outcome: 'killed' }], at(20));
    expect(stopped.reaped).toEqual([
      { pid: 10, outcome: 'terminated', at: at(20), command: 'cancelled run' },
      { pid: 11, outcome: 'killed', at: at(20), command: 'cancelled run' },
    ]);
    expect(stopped).toMatchObject({ alive_pids: [], processes_alive: false, gate_state: 'cancelled' });
  });
});

describe('lifecycle events on a run', () => {
  it('counts every event and the ignored ones apart', () => {
    const first = applyRunEvent(idleRun(), { event: 'session-end', received_at: at(11) });
    expect(first.run).toMatchObject({ events_received: 1, events_ignored: 0, gate_state: 'finished_pending_gate', ended: true });
    const second = applyRunEvent(first.run, { event: 'session-idle', received_at: at(12) });
    expect(second.outcome.ignored_reason).toMatch(/ranks below/);
    expect(second.run).toMatchObject({ events_received: 2, events_ignored: 1 });
  });

  it('fills in the tmux session the script did not report, never replaces it, and takes no process group from an agent', () => {
    const event = { event: 'session-start', received_at: at(1), tmux_session: 'tmux-a', process_group_id: 1 } as const;
    const filled = applyRunEvent(run({ dispatch_status: 'started' }), event).run;
    expect(filled).toMatchObject({ process_group_id: null, tmux_session: 'tmux-a' });
    const kept = applyRunEvent(filled, { event: 'session-idle', received_at: at(2), tmux_session: 'tmux-b' }).run;
    expect(kept).toMatchObject({ process_group_id: null, tmux_session: 'tmux-a' });
  });

  it('forgets the callbacks of the previous session when a new session starts', () => {
    const settled = run({
      dispatch_status: 'started',
      session_id: 's-1',
      gate_state: 'wake_ready',
      callbacks: [{ event_type: 'wake_ready', idempotency_key: `run-1:wake_ready:${at(3)}`, enqueued_at: at(4) }],
    });
    const { run: next, outcome } = applyRunEvent(settled, { event: 'session-start', session_id: 's-2', received_at: at(9) });
    expect(outcome.session_reset).toBe(true);
    expect(outcome.callbacks).toEqual([{ event_type: 'session_started', observed_at: at(9) }]);
    expect(next).toMatchObject({ session_id: 's-2', gate_state: 'running', callbacks: [] });
  });

  it('adopts a root reported by the agent runtime', () => {
    expect(adoptRoot(run(), 321, { pid: 321, startTicks: 55 })).toMatchObject({ root_pid: 321, root_start_ticks: 55, known_pids: [{ pid: 321, startTicks: 55 }] });
  });
});

describe('observing processes', () => {
  it('remembers each process by pid and start time, once', () => {
    const first = observeProcesses(run(), { alive: [{ pid: 10, startTicks: 1 }, { pid: 11, startTicks: 2 }], rootAlive: true, at: at(1) });
    const second = observeProcesses(first, { alive: [{ pid: 10, startTicks: 1 }, { pid: 11, startTicks: 3 }], rootAlive: false, at: at(2) });
    expect(second.known_pids).toEqual([
      { pid: 10, startTicks: 1 },
      { pid: 11, startTicks: 2 },
      { pid: 11, startTicks: 3 },
    ]);
    expect(second).toMatchObject({ alive_pids: [10, 11], root_alive: false, processes_alive: true, last_process_alive_at: at(2), processes_exited_at: null });
  });

  it('keeps no list of seen processes for a run with a cgroup, whose members are exactly its processes', () => {
    const inCgroup = { ...run(), cgroup: { kind: 'v1' as const, paths: ['/sys/fs/cgroup/pids/rcp-gate-x/run-r'] } };
    const observed = observeProcesses(inCgroup, { alive: [{ pid: 10, startTicks: 1 }, { pid: 11, startTicks: 2 }], rootAlive: false, at: at(1) });
    expect(observed).toMatchObject({ known_pids: [], alive_pids: [10, 11], processes_alive: true });
  });

  it('notes when the last process went and keeps that time while none is back', () => {
    const alive = observeProcesses(run(), { alive: [{ pid: 10, startTicks: 1 }], rootAlive: true, at: at(1) });
    const gone = observeProcesses(alive, { alive: [], rootAlive: false, at: at(2) });
    const stillGone = observeProcesses(gone, { alive: [], rootAlive: false, at: at(3) });
    expect(stillGone).toMatchObject({ alive_pids: [], processes_alive: false, last_process_alive_at: at(1), processes_exited_at: at(2) });
    const back = observeProcesses(stillGone, { alive: [{ pid: 12, startTicks: 4 }], rootAlive: false, at: at(4) });
    expect(back).toMatchObject({ processes_alive: true, processes_exited_at: null, last_process_alive_at: at(4) });
  });

  it('records reaped stale processes after the earlier ones', () => {
    const once = recordReaped(run(), [{ pid: 5, outcome: 'terminated', at: at(1), command: 'python train.py' }]);
    const twice = recordReaped(once, [{ pid: 6, outcome: 'gone', at: at(2), command: 'python eval.py' }]);
    expect(twice.reaped.map((entry) => entry.pid)).toEqual([5, 6]);
  });
});

describe('settling the quiet window', () => {
  it.each(['waiting_for_process_exit', 'waiting_for_quiet_window'] as const)('keeps waiting on %s and sends nothing', (kind) => {
    const { run: next, callback } = settleQuietWindow(idleRun(), verdict(kind, ['cpu busy', 'gpu busy']), LIMITS);
    expect(callback).toBeNull();
    expect(next).toMatchObject({ gate_state: kind, gate_reason: 'cpu busy; gpu busy' });
    expect(next.quiet_window).toMatchObject({ verdict: kind, reasons: ['cpu busy', 'gpu busy'], samples_in_window: 3 });
  });

  it('keeps an ended session in finished_pending_gate while it waits, named by the verdict when no reason is given', () => {
    const { run: next } = settleQuietWindow(idleRun({ ended: true, gate_state: 'finished_pending_gate' }), verdict('waiting_for_quiet_window'), LIMITS);
    expect(next).toMatchObject({ gate_state: 'finished_pending_gate', gate_reason: 'waiting_for_quiet_window' });
  });

  it('turns ready into wake_ready with one callback keyed by the idle time and carrying the evidence', () => {
    const { run: next, callback } = settleQuietWindow(idleRun(), verdict('ready'), LIMITS);
    expect(next).toMatchObject({ gate_state: 'wake_ready', gate_reason: 'quiet for 30 s and no tracked process alive' });
    expect(callback).toEqual({ event_type: 'wake_ready', observed_at: at(10), reason: next.gate_reason, quiet_window: METRICS, with_evidence: true });
  });

  it('reports session_finished_ready for an ended session', () => {
    const { run: next, callback } = settleQuietWindow(idleRun({ ended: true, gate_state: 'finished_pending_gate' }), verdict('ready'), LIMITS);
    expect(next.gate_state).toBe('finished_ready');
    expect(callback?.event_type).toBe('session_finished_ready');
  });

  it('ends a run that found no quiet window in time in error, with one gate_timeout', () => {
    const { run: next, callback } = settleQuietWindow(idleRun(), verdict('timed_out', ['tracked processes still alive']), LIMITS);
    expect(next).toMatchObject({ gate_state: 'error', gate_reason: 'no quiet window within max_wait_after_idle_sec (600 s): tracked processes still alive' });
    expect(callback).toMatchObject({ event_type: 'gate_timeout', observed_at: at(10), with_evidence: false, quiet_window: METRICS });
    expect(isWatched(next)).toBe(false);
  });
});

describe('an agent that dies silently', () => {
  const exited = run({ dispatch_status: 'started', processes_alive: false, processes_exited_at: at(20) });

  it('is reported once its processes have been gone for a sample interval', () => {
    const { run: next, callback } = detectSilentExit(exited, ms(22), 2);
    expect(next).toMatchObject({ gate_state: 'error', gate_reason: 'every tracked process exited before the agent reported idle, stop or end' });
    expect(callback).toMatchObject({ event_type: 'gate_error', observed_at: at(20), quiet_window: null, with_evidence: false });
  });

  it('is given one sample interval first', () => {
    expect(detectSilentExit(exited, ms(21), 2)).toEqual({ run: exited, callback: null });
  });

  it('is not assumed while a process lives or after the agent reported idle', () => {
    const alive = run({ dispatch_status: 'started', processes_alive: true, processes_exited_at: null });
    expect(detectSilentExit(alive, ms(60), 2).callback).toBeNull();
    const idle = { ...exited, gate_state: 'pending_idle_gate' as const };
    expect(detectSilentExit(idle, ms(60), 2).callback).toBeNull();
  });
});

describe('callbacks on a run', () => {
  it('are recorded in the order they were queued', () => {
    const once = recordCallback(run(), { event_type: 'session_started', idempotency_key: 'k1', enqueued_at: at(1) });
    const twice = recordCallback(once, { event_type: 'wake_ready', idempotency_key: 'k2', enqueued_at: at(2) });
    expect(twice.callbacks.map((entry) => entry.idempotency_key)).toEqual(['k1', 'k2']);
    expect(once.callbacks).toHaveLength(1);
  });
});

describe('finding runs', () => {
  const older = run({ run_id: 'old', session_id: 's-1', dispatched_at: at(1), gate_state: 'wake_ready' });
  const newer = run({ run_id: 'new', session_id: 's-1', dispatched_at: at(5) });
  const other = run({ run_id: 'other', project_id: 'proj-2', project_dir: '/srv/projects/proj-2', session_id: 's-2', dispatched_at: at(3) });
  const runs = [older, other, newer];

  it('finds the run of an event by run_id, else the newest of its session, else the newest unsettled of its project', () => {
    expect(findRunForEvent(runs, { run_id: 'old', session_id: 's-2' })?.run_id).toBe('old');
    expect(findRunForEvent(runs, { run_id: 'missing' })).toBeUndefined();
    expect(findRunForEvent(runs, { session_id: 's-1' })?.run_id).toBe('new');
    expect(findRunForEvent(runs, { session_id: 's-unknown', project_id: 'proj-2' })?.run_id).toBe('other');
    expect(findRunForEvent([older], { project_id: 'proj-1' })).toBeUndefined();
    expect(findRunForEvent(runs, {})).toBeUndefined();
  });

  it('finds the unsettled run that occupies a project directory', () => {
    expect(activeRunIn(runs, '/srv/projects/proj-1')?.run_id).toBe('new');
    expect(activeRunIn([older], '/srv/projects/proj-1')).toBeUndefined();
  });

  it('watches only started runs that have not settled', () => {
    expect(isWatched(run())).toBe(false);
    expect(isWatched(idleRun())).toBe(true);
    expect(isWatched(idleRun({ gate_state: 'question_pending' }))).toBe(false);
  });
});
