import { SETTLED_GATE_STATES, type GateState, type TelemetrySample } from './contract/gate-names.ts';
import type { GateRun } from './domain/gate-run.ts';
import { samplesNeeded } from './domain/quiet-window.ts';
import { callbackTokenFingerprint } from '../platform/http/tokens.ts';
import type { OutboxEntry } from './callback-outbox.ts';
import { profileFor, type WorkerGateConfig } from './gate-config.ts';
import type { GateEvent } from './gate-event-log.ts';
import type { SamplingHealth } from './run-monitor.ts';
import type { RunCgroupsStatus } from './run-cgroups/index.ts';
import type { AgentIsolation } from './contract/agent-isolation.ts';
import type { capacityReport } from './capacity.ts';

const SERVICE_NAME = 'research-control-plane worker gate';
/** A pending question or a usage limit is settled for the gate, but the run still waits (for a person, for the reset). */
const UNSETTLED_COUNTED_AS_WAITING: ReadonlySet<GateState> = new Set(['question_pending', 'usage_limited']);

export interface DashboardInput {
  config: WorkerGateConfig;
  ready: boolean;
  startedAt: string;
  sampling: Readonly<SamplingHealth>;
  runCgroups: RunCgroupsStatus;
  /** How agents are confined (worker-gate/agent-sandbox), as detected at start. */
  agentIsolation: AgentIsolation;
  latestSample: TelemetrySample | undefined;
  /** What the gate holds and has free for runs (capacity.ts). */
  capacity: ReturnType<typeof capacityReport>;
  runs: readonly GateRun[];
  callbacksPending: number;
  /** Outbox entries, oldest first. */
  callbacks: readonly OutboxEntry[];
  /** Gate events, newest first, already limited. */
  events: GateEvent[];
  limit: number;
}

function runView(config: WorkerGateConfig, run: GateRun) {
  // The event token's digest lets a stolen digest be matched offline; no reader of the dashboard needs it.
  const { request_hash: _hash, known_pids: _known, event_token_sha256: _eventToken, ...view } = run;
  return { ...view, samples_needed: samplesNeeded(profileFor(config, run.workload_class), config.sample_interval_sec) };
}

/** The body of `GET /dashboard/api` (docs/worker-gate.md#worker-gate): the service, totals, telemetry, capacity, runs, callbacks, events. */
export function dashboardBody(input: DashboardInput) {
  const { config, sampling, latestSample: sample, limit } = input;
  const runs = [...input.runs].sort((a, b) => b.updated_at.localeCompare(a.updated_at));
  return {
    ok: true,
    service: {
      name: SERVICE_NAME,
      role: 'worker_gate',
      ready: input.ready,
      started_at: input.startedAt,
      project_root: config.project_root,
      sample_interval_sec: config.sample_interval_sec,
      default_workload_class: config.default_workload_class,
      max_wait_after_idle_sec: config.max_wait_after_idle_sec,
      stale_project_process_reaper_enabled: config.stale_project_process_reaper_enabled,
      completion_callback_url: config.completion_callback_url,
      completion_callback_fallback_urls: config.completion_callback_fallback_urls,
      completion_callback_token_fingerprint: callbackTokenFingerprint(config.completion_callback_token),
      last_tick_error: sampling.lastTickError,
      sampling: {
        samples: sampling.samples,
        cpu_ms_per_sample: sampling.samples ? Math.round((sampling.cpuMs / sampling.samples) * 1000) / 1000 : null,
      },
      run_cgroups: input.runCgroups,
      agent_isolation: input.agentIsolation,
    },
    totals: {
      runs: runs.length,
      active_or_waiting: runs.filter((run) => !SETTLED_GATE_STATES.has(run.gate_state) || UNSETTLED_COUNTED_AS_WAITING.has(run.gate_state)).length,
      live: runs.filter((run) => run.processes_alive).length,
      callback_pending: input.callbacksPending,
    },
    telemetry: {
      sampled_at: sample ? new Date(sample.at_ms).toISOString() : null,
      cpu_pct: sample?.cpu_pct ?? null,
      gpu_pct: sample?.gpu_pct ?? null,
      gpu_compute_pids: sample?.gpu_compute_pids ?? [],
      vram_used_mib: sample?.vram_used_mib ?? null,
      memory_available_mib: sample?.memory_available_mib ?? null,
      memory_source: sample?.memory_source ?? null,
      gpu_source: sample?.gpu_source ?? null,
      notes: sample?.notes ?? [],
    },
    capacity: input.capacity,
    runs: runs.slice(0, limit).map((run) => runView(config, run)),
    callbacks: input.callbacks
      .slice(-limit)
      .reverse()
      .map(({ payload: _payload, ...entry }) => entry),
    events: input.events,
  };
}
