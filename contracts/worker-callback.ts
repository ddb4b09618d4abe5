import { z } from 'zod';
import { openObject } from '../http/responses.ts';
import { CALLBACK_EVENT_TYPES, GATE_STATES } from '../domain/gate.ts';

/** Which evidence files the gate found in the project when it reported readiness (README "Worker gate"). */
export const RunEvidenceSchema = z.strictObject({
  run_notes: z.boolean(),
  decision_file: z.boolean(),
  /** `decision` from `.research/decision.json`, null when absent or unreadable. */
  decision: z.string().nullable(),
  decision_summary: z.string().nullable(),
  /** Non-empty `results/**\/*.json` files. */
  results_json_files: z.number().int().min(0),
  /** run_notes.md plus decision.json, or run_notes.md plus non-empty results JSON. */
  sufficient_for_paper: z.boolean(),
});
export type RunEvidence = z.infer<typeof RunEvidenceSchema>;

export function hasPaperEvidence(evidence: Pick<RunEvidence, 'run_notes' | 'decision_file' | 'results_json_files'>): boolean {
  return evidence.run_notes && (evidence.decision_file || evidence.results_json_files > 0);
}

const nullableNumber = z.number().nullable();

export const CallbackTelemetrySchema = z.strictObject({
  cpu_pct: nullableNumber,
  gpu_pct: nullableNumber,
  vram_used_mib: nullableNumber,
  vram_baseline_mib: nullableNumber,
  memory_available_mib: nullableNumber,
  gpu_source: z.string(),
  quiet_window: z
    .strictObject({
      samples_needed: z.number().int(),
      samples_in_window: z.number().int(),
      mean_cpu_pct: nullableNumber,
      mean_gpu_pct: nullableNumber,
      peak_gpu_pct: nullableNumber,
      vram_delta_mib: nullableNumber,
      gpu_present: z.boolean(),
    })
    .nullable(),
});

export const CallbackProcessTrackingSchema = z.strictObject({
  root_pid: z.number().int().nullable(),
  process_group_id: z.number().int().nullable(),
  tmux_session: z.string().nullable(),
  root_alive: z.boolean(),
  alive_pids: z.array(z.number().int()),
  reaped_pids: z.array(z.number().int()),
});

/** The body the worker gate posts to `completion_callback_url` (README "Runs"). */
export const WorkerCallbackSchema = z.strictObject({
  event_type: z.enum(CALLBACK_EVENT_TYPES),
  run_id: z.string().min(1),
  session_id: z.string().nullable(),
  project_id: z.string().min(1),
  gate_state: z.enum(GATE_STATES),
  reason: z.string(),
  idle_seen_at: z.string().nullable(),
  seen_at: z.string(),
  delivered_at: z.string().nullable(),
  telemetry: CallbackTelemetrySchema,
  process_tracking: CallbackProcessTrackingSchema,
  question: z.string().nullable().optional(),
  evidence: RunEvidenceSchema.nullable().optional(),
  idempotency_key: z.string().min(1),
});
export type WorkerCallback = z.infer<typeof WorkerCallbackSchema>;

/** The control plane's answer to a callback; a redelivery answers the first answer. */
export const WorkerCallbackResponseSchema = openObject({
  ok: z.literal(true),
  idempotency_key: z.string(),
  run_id: z.string(),
  event_type: z.string(),
  ignored: z.boolean().describe('True when the callback was recorded but changes nothing (not the current run, or a finished one)'),
  ignore_reason: z.string().optional(),
});
