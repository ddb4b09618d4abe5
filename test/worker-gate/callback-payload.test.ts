import { describe, expect, it } from 'vitest';
import { GateCallbackPayloadSchema, readRunEvidence, WorkerCallbackSchema, type RunEvidence } from '../../worker-gate/contract/callback-body.ts';
import type { TelemetrySample } from '../../worker-gate/contract/gate-names.ts';
import { startingRun, type CallbackIntent, type GateRun } from '../../worker-gate/domain/gate-run.ts';
import { buildCallbackPayload } from '../../worker-gate/callback-payload.ts';

const RUN: GateRun = {
  ...startingRun(
    {
      run_id: 'run-7',
      project_id: 'proj-7',
      project_name: 'proj-7',
      project_dir: '/srv/projects/proj-7',
      prompt_file: '/srv/projects/proj-7/prompt.md',
      workload_class: 'inference_eval',
      machine_target: null,
      mode: 'exec',
      model: 'model-a',
      reasoning_effort: 'low',
      sandbox: '',
      request_hash: 'h',
      vram_baseline_mib: 1024,
    },
    '2026-11-22T12:00:00.000Z',
  ),
  dispatch_status: 'started',
  session_id: 's-7',
  idle_seen_at: '2026-11-22T12:05:00.000Z',
  ended: true,
  gate_state: 'finished_ready',
  root_pid: 100,
  process_group_id: 100,
  tmux_session: 'agent-7',
  root_alive: false,
  alive_pids: [],
  reaped: [{ pid: 140, outcome: 'terminated', at: '2026-11-22T12:04:00.000Z', command: 'python leftover.py' }],
};

const SAMPLE: TelemetrySample = {
  at_ms: Date.parse('2026-11-22T12:06:00.000Z'),
  cpu_pct: 2.5,
  gpu_pct: 0,
  vram_used_mib: 1100,
  gpu_compute_pids: [],
  gpu_count: 1,
  gpu_source: 'nvidia-smi',
  memory_available_mib: 30_000,
  memory_source: 'meminfo',
  notes: [],
};

const READY: CallbackIntent = {
  event_type: 'session_finished_ready',
  observed_at: '2026-11-22T12:05:00.000Z',
  reason: 'quiet for 30 s and no tracked process alive',
  quiet_window: {
    samples_needed: 3,
    samples_in_window: 3,
    mean_cpu_pct: 2.1,
    mean_gpu_pct: 0,
    peak_gpu_pct: 1,
    vram_delta_mib: 76,
    gpu_present: true,
    window_started_at_ms: Date.parse('2026-11-22T12:05:00.000Z'),
  },
  with_evidence: true,
};

const EVIDENCE: RunEvidence = {
  run_notes: true,
  decision_file: true,
  decision: 'positive',
  decision_summary: null,
  results_json_files: 1,
  sufficient_for_paper: true,
};

const SEEN_AT = '2026-11-22T12:06:01.000Z';

describe('the callback payload', () => {
  it('is a valid WorkerCallback keyed by run, event type and observation time', () => {
    const payload = buildCallbackPayload({ run: RUN, callback: READY, sample: SAMPLE, evidence: EVIDENCE, seenAt: SEEN_AT });
    expect(GateCallbackPayloadSchema.parse(payload)).toEqual(payload);
    expect(WorkerCallbackSchema.parse(payload)).toEqual(payload);
    expect(payload).toMatchObject({
      event_type: 'session_finished_ready',
      run_id: 'run-7',
      session_id: 's-7',
      project_id: 'proj-7',
      gate_state: 'finished_ready',
      reason: READY.reason,
      idle_seen_at: '2026-11-22T12:05:00.000Z',
      seen_at: SEEN_AT,
      delivered_at: null,
      evidence: EVIDENCE,
      idempotency_key: 'run-7:session_finished_ready:2026-11-22T12:05:00.000Z',
    });
  });

  it('carries the latest telemetry, the dispatch-time VRAM baseline and the quiet-window figures the schema knows', () => {
    const { telemetry } = buildCallbackPayload({ run: RUN, callback: READY, sample: SAMPLE, evidence: EVIDENCE, seenAt: SEEN_AT });
    expect(telemetry).toEqual({
      cpu_pct: 2.5,
      gpu_pct: 0,
      vram_used_mib: 1100,
      vram_baseline_mib: 1024,
      memory_available_mib: 30_000,
      gpu_source: 'nvidia-smi',
      quiet_window: { samples_needed: 3, samples_in_window: 3, mean_cpu_pct: 2.1, mean_gpu_pct: 0, peak_gpu_pct: 1, vram_delta_mib: 76, gpu_present: true },
    });
  });

  it('reports the run processes, with the pids of reaped stale processes', () => {
    const { process_tracking } = buildCallbackPayload({ run: RUN, callback: READY, sample: SAMPLE, evidence: null, seenAt: SEEN_AT });
    expect(process_tracking).toEqual({ root_pid: 100, process_group_id: 100, tmux_session: 'agent-7', root_alive: false, alive_pids: [], reaped_pids: [140] });
  });

  it('has null figures and no GPU source before the first sample, and no quiet window for a lifecycle callback', () => {
    const question: CallbackIntent = { event_type: 'question_pending', observed_at: '2026-11-22T12:01:00.000Z', reason: 'asked', quiet_window: null, with_evidence: false };
    const payload = buildCallbackPayload({
      run: { ...RUN, gate_state: 'question_pending', question: 'Which split?' },
      callback: question,
      sample: undefined,
      evidence: null,
      seenAt: SEEN_AT,
    });
    expect(WorkerCallbackSchema.safeParse(payload).success).toBe(true);
    expect(payload.telemetry).toEqual({
      cpu_pct: null,
      gpu_pct: null,
      vram_used_mib: null,
      vram_baseline_mib: 1024,
      memory_available_mib: null,
      gpu_source: 'none',
      quiet_window: null,
    });
    expect(payload).toMatchObject({ question: 'Which split?', evidence: null, idempotency_key: 'run-7:question_pending:2026-11-22T12:01:00.000Z' });
  });
});

describe('reading the evidence a gate reported', () => {
  it('reads our gate\'s evidence as it is', () => {
    expect(readRunEvidence(EVIDENCE)).toEqual(EVIDENCE);
    expect(readRunEvidence(null)).toBeNull();
    expect(readRunEvidence(undefined)).toBeNull();
  });

  it('counts a field of the wrong type as absent and derives sufficiency from the files when not given as a boolean', () => {
    expect(readRunEvidence({ run_notes: 'yes', decision_file: 1, results_json_files: -3, decision: 7, sufficient_for_paper: 'true' })).toEqual({
      run_notes: false,
      decision_file: false,
      decision: null,
      decision_summary: null,
      results_json_files: 0,
      sufficient_for_paper: false,
    });
    expect(readRunEvidence({ run_notes: true, results_json_files: 2.5 })).toMatchObject({ results_json_files: 0, sufficient_for_paper: false });
    expect(readRunEvidence({ run_notes: true, decision_file: true })).toMatchObject({ sufficient_for_paper: true });
    expect(readRunEvidence({ run_notes: true, decision_file: true, sufficient_for_paper: false })).toMatchObject({ sufficient_for_paper: false });
  });
});
