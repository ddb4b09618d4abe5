import { z } from 'zod';
import { withinJsonBounds } from '../../platform/http/json-bounds.ts';
import { CALLBACK_EVENT_TYPES, GATE_STATES } from './gate-names.ts';
import { AgentQuestionInputSchema } from './agent-question.ts';
import { RUN_CAUSE_COMMAND_MAX, RUN_CAUSE_KINDS, RUN_CAUSE_MESSAGE_MAX, RUN_CAUSE_REAPED_MAX } from './run-cause.ts';

/** Which evidence files the gate found in the project when it reported readiness (docs/worker-gate.md#worker-gate). */
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

/** The body this project's worker gate posts to `completion_callback_url`, exactly (docs/worker-gate.md#worker-gate). */
const tokenCount = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** The tokens a run's agent has spent, as its tool reported them to the gate. */
export const TokenUsageSchema = z.strictObject({ input_tokens: tokenCount, output_tokens: tokenCount, total_tokens: tokenCount });

/** Why the run ended, as the gate saw it (worker-gate/contract/run-cause.ts): bounded, every field checked. */
export const RunCauseSchema = z
  .strictObject({
    kind: z.enum(RUN_CAUSE_KINDS),
    exit_code: z.number().int().min(0).max(255).optional(),
    signal: z.string().regex(/^SIG[A-Z0-9]{1,12}$/).optional(),
    model_status: z.number().int().min(100).max(599).optional().describe('The HTTP status the model server answered'),
    message: z.string().max(RUN_CAUSE_MESSAGE_MAX).optional(),
    resets_at: z.iso.datetime({ offset: true }).optional().describe('With usage_limit: when the limit resets, where the tool said'),
    reaped: z
      .array(z.strictObject({ pid: z.number().int().min(1), command: z.string().max(RUN_CAUSE_COMMAND_MAX), outcome: z.string().max(40) }))
      .max(RUN_CAUSE_REAPED_MAX)
      .optional()
      .describe('Processes of the run the gate stopped or reaped'),
  })
  .describe('Why the run ended: model_error, usage_limit, crash, signal, token_budget, stall, exit or reaped');

export const GateCallbackPayloadSchema = z.strictObject({
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
  /** With question_pending: the question with its choices, or the tool call a permission request is for. */
  question_detail: AgentQuestionInputSchema.nullable().optional(),
  evidence: RunEvidenceSchema.nullable().optional(),
  /** What the run's agent has spent so far; absent while the gate knows nothing of it (a script agent that reports none). */
  token_usage: TokenUsageSchema.nullable().optional(),
  /** Why the run ended; on finishing callbacks whose cause the gate knows. */
  cause: RunCauseSchema.nullable().optional(),
  /** With usage_limited: when the run's session resumes by itself (docs/worker-gate.md#waiting-out-a-usage-limit). */
  resumes_at: z.iso.datetime({ offset: true }).nullable().optional(),
  /** With usage_limited: false when the wait is long and the gate let the run's slot go meanwhile. */
  holds_slot: z.boolean().optional(),
  idempotency_key: z.string().min(1),
});
export type GateCallbackPayload = z.infer<typeof GateCallbackPayloadSchema>;

/** Bounds on the free-form objects a callback carries: enough for any gate's report, too small to flood the ledger. */
export const CALLBACK_OBJECT_MAX_BYTES = 16 * 1024;
export const CALLBACK_OBJECT_MAX_DEPTH = 8;

/**
 * A JSON object of another gate's making: stored as sent, never acted on field by field. Its values arrive parsed from
 * JSON, so `unknown` is JSON here (and keeps the published schema free of a recursive JSON type).
 */
const boundedJsonObject = (what: string) =>
  withinJsonBounds(z.record(z.string(), z.unknown()), what, { maxBytes: CALLBACK_OBJECT_MAX_BYTES, maxDepth: CALLBACK_OBJECT_MAX_DEPTH });

/**
 * The callback body the control plane accepts (docs/runs.md#runs). A worker host may run a gate of another
 * implementation, so only what the control plane acts on is validated strictly: the top-level fields and their types.
 * `telemetry`, `process_tracking` and `evidence` are bounded JSON objects, stored as sent; the evidence fields a run
 * needs are read defensively by `readRunEvidence`. Unknown top-level fields are refused.
 */
export const WorkerCallbackSchema = z.strictObject({
  ...GateCallbackPayloadSchema.shape,
  telemetry: boundedJsonObject('telemetry'),
  process_tracking: boundedJsonObject('process_tracking'),
  evidence: boundedJsonObject('evidence').nullable().optional(),
});
export type WorkerCallback = z.infer<typeof WorkerCallbackSchema>;

/**
 * The evidence a run acts on, read from whatever a gate reported: a field of the wrong type counts as absent, and
 * `sufficient_for_paper` is derived from the files when the gate did not say it as a boolean.
 */
export function readRunEvidence(reported: Record<string, unknown> | null | undefined): RunEvidence | null {
  if (!reported) return null;
  const flag = (value: unknown) => value === true;
  const text = (value: unknown) => (typeof value === 'string' ? value : null);
  const count = reported.results_json_files;
  const files = {
    run_notes: flag(reported.run_notes),
    decision_file: flag(reported.decision_file),
    results_json_files: typeof count === 'number' && Number.isSafeInteger(count) && count > 0 ? count : 0,
  };
  const sufficient = reported.sufficient_for_paper;
  return {
    ...files,
    decision: text(reported.decision),
    decision_summary: text(reported.decision_summary),
    sufficient_for_paper: typeof sufficient === 'boolean' ? sufficient : hasPaperEvidence(files),
  };
}

/** The control plane's answer to a callback; a redelivery answers the first answer. */
export const WorkerCallbackResponseSchema = z.object({
  ok: z.literal(true),
  idempotency_key: z.string(),
  run_id: z.string(),
  event_type: z.string(),
  ignored: z.boolean().describe('True when the callback was recorded but changes nothing (not the current run, or a finished one)'),
  ignore_reason: z.string().optional(),
});
