/**
 * A started run as the gate watches it (docs/worker-gate.md#worker-gate): its processes as each scan finds them, a
 * stall, a silent exit, and the quiet window after idle, stop or end. Each function takes a record and returns the
 * next one, with the callback a transition asks the gate to send.
 */
import { SETTLED_GATE_STATES } from '../contract/gate-names.ts';
import { readyCallbackFor } from './gate-lifecycle.ts';
import type { GateRun, TrackedPid, Transition } from './gate-run.ts';
import type { QuietWindowVerdict } from './quiet-window.ts';

/**
 * A running agent that has shown no progress (no event, model answer, tool event or usage change) for
 * `stallAfterSec` has stalled: the run ends in error with one gate_error, and the gate stops its processes.
 */
export function detectStall(run: GateRun, nowMs: number, stallAfterSec: number): Transition {
  if (run.gate_state !== 'running') return { run, callback: null };
  const since = run.last_progress_at ?? run.dispatched_at;
  if (nowMs - Date.parse(since) < stallAfterSec * 1000) return { run, callback: null };
  const reason = `stalled: no model answer, tool event or usage change for ${stallAfterSec} s (last progress at ${since})`;
  const observedAt = new Date(Date.parse(since) + stallAfterSec * 1000).toISOString();
  return {
    run: { ...run, gate_state: 'error', gate_reason: reason, cause: { kind: 'stall', message: reason } },
    callback: { event_type: 'gate_error', observed_at: observedAt, reason, quiet_window: null, with_evidence: false },
  };
}

/** One scan of the process table: which of the run's processes are alive at `at`. */
export interface ProcessObservation {
  alive: readonly TrackedPid[];
  rootAlive: boolean;
  at: string;
}

/** Remembers every process seen (pid and start time) and when the run last had, or stopped having, a live process. */
export function observeProcesses(run: GateRun, observation: ProcessObservation): GateRun {
  // A run with a cgroup needs no such list (its cgroup says which processes are its own), and a fork bomb's churn
  // would grow it without end.
  const known = run.cgroup ? run.known_pids : [...run.known_pids];
  if (!run.cgroup) {
    const seen = new Set(known.map((entry) => `${entry.pid}:${entry.startTicks}`));
    for (const proc of observation.alive) {
      const key = `${proc.pid}:${proc.startTicks}`;
      if (seen.has(key)) continue;
      seen.add(key);
      known.push({ pid: proc.pid, startTicks: proc.startTicks });
    }
  }
  const processesAlive = observation.alive.length > 0;
  return {
    ...run,
    known_pids: known,
    alive_pids: observation.alive.map((proc) => proc.pid),
    root_alive: observation.rootAlive,
    processes_alive: processesAlive,
    last_process_alive_at: processesAlive ? observation.at : run.last_process_alive_at,
    processes_exited_at: processesAlive ? null : (run.processes_exited_at ?? observation.at),
  };
}

export interface QuietWindowLimits {
  idleSustainSec: number;
  maxWaitAfterIdleSec: number;
}

/**
 * Applies a quiet-window verdict to a run waiting after idle, stop or end: it keeps waiting, becomes ready (with one
 * readiness callback that carries the evidence), or runs out of time (one gate_timeout).
 */
export function settleQuietWindow(run: GateRun, verdict: QuietWindowVerdict, limits: QuietWindowLimits): Transition {
  const observed: GateRun = { ...run, quiet_window: { ...verdict.metrics, verdict: verdict.verdict, reasons: verdict.reasons } };
  const reason = verdict.reasons.join('; ');
  const idleSeenAt = run.idle_seen_at as string;
  switch (verdict.verdict) {
    case 'waiting_for_process_exit':
    case 'waiting_for_quiet_window':
      return {
        run: { ...observed, gate_state: run.ended ? 'finished_pending_gate' : verdict.verdict, gate_reason: reason || verdict.verdict },
        callback: null,
      };
    case 'ready': {
      const ready = readyCallbackFor(run);
      const gateReason = `quiet for ${limits.idleSustainSec} s and no tracked process alive`;
      return {
        run: { ...observed, gate_state: ready.gate_state, gate_reason: gateReason },
        callback: { event_type: ready.event_type, observed_at: idleSeenAt, reason: gateReason, quiet_window: verdict.metrics, with_evidence: true },
      };
    }
    case 'timed_out': {
      const gateReason = `no quiet window within max_wait_after_idle_sec (${limits.maxWaitAfterIdleSec} s)${reason ? `: ${reason}` : ''}`;
      return {
        run: { ...observed, gate_state: 'error', gate_reason: gateReason },
        callback: { event_type: 'gate_timeout', observed_at: idleSeenAt, reason: gateReason, quiet_window: verdict.metrics, with_evidence: false },
      };
    }
  }
}

/**
 * A running agent whose processes have all been gone for at least one sample interval, without idle, stop, end or a
 * question, has died: the run ends in error with one gate_error.
 */
export function detectSilentExit(run: GateRun, nowMs: number, sampleIntervalSec: number): Transition {
  if (run.gate_state !== 'running' || run.processes_alive || run.processes_exited_at === null) return { run, callback: null };
  if (nowMs - Date.parse(run.processes_exited_at) < sampleIntervalSec * 1000) return { run, callback: null };
  const reason = 'every tracked process exited before the agent reported idle, stop or end';
  return {
    run: { ...run, gate_state: 'error', gate_reason: reason, cause: run.cause ?? { kind: 'crash', message: reason } },
    callback: { event_type: 'gate_error', observed_at: run.processes_exited_at, reason, quiet_window: null, with_evidence: false },
  };
}

/** True while the gate samples this run: its agent was started and the gate has not settled. */
export function isWatched(run: GateRun): boolean {
  return run.dispatch_status === 'started' && !SETTLED_GATE_STATES.has(run.gate_state);
}
