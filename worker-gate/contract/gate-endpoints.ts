import { z } from 'zod';
import { AgentQuestionInputSchema, AgentQuestionSchema, AllowedToolSchema, RESUME_PROMPT_MAX } from './agent-question.ts';
import { AGENT_EVENTS, CALLBACK_EVENT_TYPES, DISPATCH_MODES, GATE_STATES, LIFECYCLE_EVENTS, REASONING_EFFORTS } from './gate-names.ts';
import { RunCauseSchema, TokenUsageSchema } from './callback-body.ts';
import { WORKLOAD_CLASSES } from './workload.ts';
import { AgentIsolationSchema } from './agent-isolation.ts';
import { JsonValueSchema, jsonObject } from '../../platform/http/json-value.ts';
import { RunIdSchema } from './run-id.ts';
import { AgentTranscriptDraftSchema } from './run-transcript.ts';

/** Request and response bodies of the worker gate's endpoints (docs/worker-gate.md#worker-gate). */

export { RunIdSchema };
const ProjectIdSchema = z.string().min(1).max(200);
/** Longest name of one path component on the file systems the gate runs on (bytes). */
const MAX_PATH_COMPONENT_BYTES = 255;
const PathText = z
  .string()
  .min(1)
  .max(4096)
  .refine((v) => !v.includes('\0'), 'must not contain NUL')
  .refine(
    (v) => v.split('/').every((part) => Buffer.byteLength(part) <= MAX_PATH_COMPONENT_BYTES),
    `each part of the path must be at most ${MAX_PATH_COMPONENT_BYTES} bytes`,
  );

export const PrepareProjectSchema = z.strictObject({
  run_id: RunIdSchema,
  project_id: ProjectIdSchema,
  project_name: z.string().max(500).optional(),
  /** Absolute, or relative to project_root. */
  project_dir: PathText,
  /** Absolute, or relative to project_dir. */
  prompt_file: PathText,
  prompt_text: z.string().max(512 * 1024),
  overwrite: z.boolean().default(false),
  // Recorded in .research/project.json (docs/worker-gate.md#worker-gate).
  workload_class: z.enum(WORKLOAD_CLASSES).optional(),
  machine_target: z.string().min(1).max(200).optional(),
});
export type PrepareProjectRequest = z.output<typeof PrepareProjectSchema>;

/** Most GPUs one run may be given, and most CPUs it may be pinned to. */
export const MAX_RUN_GPUS = 64;
export const MAX_CPU_COUNT = 4096;

/** GPU indices as nvidia-smi numbers them, each at most once. */
export const GpuIndicesSchema = z
  .array(z.number().int().min(0).max(255))
  .max(MAX_RUN_GPUS)
  .refine((list) => new Set(list).size === list.length, 'must not name a GPU index twice');

export const DispatchSchema = z.strictObject({
  run_id: RunIdSchema,
  project_id: ProjectIdSchema,
  project_name: z.string().max(500).optional(),
  project_dir: PathText,
  prompt_file: PathText,
  mode: z.enum(DISPATCH_MODES).default('exec'),
  model: z.string().max(200).default(''),
  reasoning_effort: z.enum(REASONING_EFFORTS).default('medium'),
  sandbox: z.string().max(200).default(''),
  /**
   * The tokens a real agent may spend before the gate's launcher stops it (the candidate's expected_token_budget times
   * the control plane's agent_token_budget_multiple); absent: no limit.
   */
  token_budget: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
  /** Which threshold profile the quiet window uses; the gate's default_workload_class when absent. */
  workload_class: z.enum(WORKLOAD_CLASSES).optional(),
  machine_target: z.string().min(1).max(200).optional(),
  /**
   * The GPUs the run gets, as nvidia-smi numbers them (docs/worker-gate.md#slots-and-gpus): its agent sees only these
   * (CUDA_VISIBLE_DEVICES) and its quiet window reads only these; [] gives it none. Absent: not pinned, it sees every GPU.
   */
  gpu_indices: GpuIndicesSchema.optional(),
  /** How many CPUs the run is pinned to (its cgroup's cpuset), where the gate's cgroups allow it; absent: not pinned. */
  cpu_count: z.number().int().min(1).max(MAX_CPU_COUNT).optional(),
});
export type DispatchRequest = z.output<typeof DispatchSchema>;

/** What the dispatch script prints: one JSON object. Extra keys are kept in the run record. */
export const DispatchScriptOutputSchema = z.looseObject({
  root_pid: z.number().int().positive().optional(),
  process_group_id: z.number().int().positive().optional(),
  tmux_session: z.string().max(200).optional(),
});

const optionalText = (max: number) => z.string().max(max).nullish().transform((v) => v ?? undefined);
const optionalPid = z.number().int().positive().nullish().transform((v) => v ?? undefined);
const tokenCount = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** Lifecycle event the agent runtime posts to `/legacy-agent/event`. */
export const ControlPlaneEventSchema = z.strictObject({
  /** `progress`: the gate's runner saw the agent's tool move (a model answer, a tool event, a usage change); it changes no state. */
  event: z.enum(AGENT_EVENTS),
  run_id: RunIdSchema.nullish().transform((v) => v ?? undefined),
  session_id: optionalText(200),
  project_id: optionalText(200),
  project_name: optionalText(500),
  question: optionalText(20_000),
  /** With ask-user-question: the question with its choices, or the tool call a permission request is for. */
  question_detail: AgentQuestionInputSchema.nullish().transform((v) => v ?? undefined),
  root_pid: optionalPid,
  process_group_id: optionalPid,
  timestamp: z.iso.datetime({ offset: true }).nullish().transform((v) => v ?? undefined),
  tmux_session: optionalText(200),
  message: optionalText(20_000),
  /** With session-end, from a launcher that saw the agent's process end: non-zero ends the run in error. */
  exit_code: z.number().int().min(0).max(255).nullish().transform((v) => v ?? undefined),
  /** The tokens the agent's session has spent so far, as its tool reports them. */
  token_usage: z
    .strictObject({ input_tokens: tokenCount, output_tokens: tokenCount, total_tokens: tokenCount })
    .nullish()
    .transform((v) => v ?? undefined),
  /** With session-end, from the gate's launcher: the run's token budget, which token_usage passed, so it stopped the agent. */
  token_budget_exceeded: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).nullish().transform((v) => v ?? undefined),
  /** With session-end, from the gate's runner: how the tool ended (exit, signal, the model's error). Reaped processes are the gate's own to add. */
  cause: RunCauseSchema.omit({ reaped: true }).nullish().transform((v) => v ?? undefined),
  /** With progress: entries the agent adds to its run's transcript itself (the simulated agent's steps). */
  transcript: z.array(AgentTranscriptDraftSchema).max(20).nullish().transform((v) => v ?? undefined),
});
export type ControlPlaneEvent = z.output<typeof ControlPlaneEventSchema>;

/** @deprecated The older name of {@link ControlPlaneEventSchema}; kept for compatibility. */
export const OmxEventSchema = ControlPlaneEventSchema;
/** @deprecated Use {@link ControlPlaneEvent}. */
export type OmxEvent = ControlPlaneEvent;

/** A caller's challenge to a worker gate; the gate proves it holds its token by answering it (docs/worker-gate.md#worker-gate). */
export const GateIdentityQuerySchema = z.strictObject({
  challenge: z.string().regex(/^[A-Za-z0-9_-]{22,128}$/, 'must be 22–128 URL-safe base64 characters'),
});

// Answers: closed, every field named (docs/http.md#http-conventions, answers).

const nullableInt = z.number().int().nullable();

export const GateHealthSchema = z.object({
  ok: z.boolean(),
  service: z.literal('worker-gate'),
  ready: z.boolean(),
  timestamp: z.string().optional(),
  detail: z.string().optional().describe('Why the gate is not ready'),
});

export const GateIdentitySchema = z.object({
  service: z.literal('worker-gate'),
  proof: z.string().describe('HMAC-SHA256, keyed by the gate\'s worker_wake_gate_bearer_token, of a fixed label and the challenge (base64url)'),
});

export const PrepareProjectResponseSchema = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  project_id: z.string(),
  project_dir: z.string(),
  prompt_file: z.string(),
  project_json: z.string(),
  created: z.boolean().describe('False when the same run was already prepared with the same prompt'),
  overwritten: z.boolean(),
});

const ScriptOutputSchema = jsonObject().describe('The JSON the dispatch script printed: the script decides its shape');

export const DispatchResponseSchema = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  project_id: z.string(),
  project_dir: z.string(),
  workload_class: z.enum(WORKLOAD_CLASSES),
  root_pid: nullableInt,
  process_group_id: nullableInt,
  tmux_session: z.string().nullable(),
  vram_baseline_mib: z.number().nullable(),
  gate_state: z.enum(GATE_STATES),
  dispatched_at: z.string(),
  already_dispatched: z.boolean().describe('True when the run had been dispatched before: the script did not run again'),
  script_output: ScriptOutputSchema,
  gpu_indices: z.array(z.number().int()).nullable().describe('The GPUs the run was given (its agent sees only these); null: not pinned, it sees every GPU'),
  cpus: z.array(z.number().int()).nullable().describe("The CPUs the run's cgroup is pinned to; null: not pinned (no cpu_count, or no cpuset here: cpus_unpinned_reason)"),
  cpus_unpinned_reason: z.string().nullable().describe('Why a run given a cpu_count was not pinned (no cgroup cpuset on this gate); null otherwise'),
});

/**
 * A resume of a run whose agent waits on a person (docs/worker-gate.md#resuming-a-run): the same session of the same run
 * starts again with `prompt`, in the run's cgroup, slot and sandbox. Once per resume_id.
 */
export const ResumeRunSchema = z.strictObject({
  resume_id: z.string().regex(/^[A-Za-z0-9._:-]{1,100}$/, 'must be 1–100 letters, digits, ".", "_", ":" or "-"'),
  prompt: z.string().trim().min(1).max(RESUME_PROMPT_MAX),
  allowed_tools: z.array(AllowedToolSchema).max(20).default([]).describe('Tools the resumed session may use without asking: for its next session only, or for the rest of the run'),
});
export type ResumeRunRequest = z.output<typeof ResumeRunSchema>;

export const ResumeRecordSchema = z.object({
  resume_id: z.string(),
  at: z.string(),
  prompt_sha256: z.string(),
  allowed_tools: z.array(z.string()),
});

export const ResumeRunResponseSchema = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  resume_id: z.string(),
  gate_state: z.enum(GATE_STATES),
  already_resumed: z.boolean().describe('True when this resume_id had been taken before: nothing started again'),
  resumes: z.number().int().describe('How many times the run has been resumed'),
  root_pid: nullableInt,
});

export const CancelRunResponseSchema = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  gate_state: z.literal('cancelled'),
  already_cancelled: z.boolean(),
  stopped: z.array(z.object({ pid: z.number().int(), outcome: z.string(), error: z.string().optional() })),
});

export const ControlPlaneEventResponseSchema = z.object({
  ok: z.literal(true),
  recorded: z.literal(true),
  run_id: z.string().nullable(),
  ignored: z.boolean(),
  ignore_reason: z.string().optional(),
  gate_state: z.enum(GATE_STATES).optional(),
  session_reset: z.boolean().optional(),
  callbacks: z.array(z.string()).describe('Idempotency keys of the callbacks this event queued'),
});

const RECORD_KEEPS = 'open: a run record keeps what the gate version that wrote it recorded';
const trackedPid = z.object({ pid: z.number().int(), startTicks: z.number().int() });

/** A run as the gate's dashboard shows it: its record without the request hash, the tracked pids and the event-token digest. */
export const GateRunViewSchema = z.object({
  run_id: z.string(),
  project_id: z.string(),
  project_name: z.string(),
  project_dir: z.string(),
  prompt_file: z.string(),
  workload_class: z.enum(WORKLOAD_CLASSES),
  machine_target: z.string().nullable(),
  mode: z.enum(DISPATCH_MODES),
  model: z.string(),
  reasoning_effort: z.enum(REASONING_EFFORTS),
  sandbox: z.string(),
  token_budget: z.number().int().nullable().optional().describe('null: no limit; absent from older records'),
  dispatch_status: z.enum(['starting', 'started', 'interrupted']),
  dispatched_at: z.string(),
  dispatch_duration_ms: z.number().nullable(),
  script_output: ScriptOutputSchema,
  root_pid: nullableInt,
  root_start_ticks: nullableInt,
  process_group_id: nullableInt,
  tmux_session: z.string().nullable(),
  token_usage: TokenUsageSchema.nullable().optional().describe('Absent from older records'),
  last_progress_at: z.string().nullable().optional().describe("The agent's last sign of progress (an event, a model answer, a tool event); absent from older records"),
  cause: RunCauseSchema.nullable().optional().describe('Why the run ended, once the gate knows; absent from older records'),
  cgroup: z
    .object({ kind: z.enum(['v2', 'v1']), paths: z.array(z.string()) })
    .nullable()
    .optional()
    .describe("The run's own cgroup (its directory in each hierarchy); null where the gate has no cgroups, absent from older records"),
  dispatch_script: trackedPid.nullable().optional().describe('Absent from older records'),
  gpu_indices: z.array(z.number().int()).nullable().optional().describe('The GPUs the run was given; null: not pinned (it sees every GPU); absent from older records'),
  cpus: z.array(z.number().int()).nullable().optional().describe("The CPUs the run's cgroup is pinned to; null: not pinned; absent from older records"),
  cpus_unpinned_reason: z.string().nullable().optional().describe('Why a run given a cpu_count was not pinned; null otherwise; absent from older records'),
  vram_baseline_mib: z.number().nullable(),
  alive_pids: z.array(z.number().int()),
  root_alive: z.boolean(),
  processes_alive: z.boolean(),
  last_process_alive_at: z.string().nullable(),
  processes_exited_at: z.string().nullable(),
  reaped: z.array(z.object({ pid: z.number().int(), outcome: z.string(), at: z.string(), command: z.string() })),
  quiet_window: jsonObject().nullable().describe(`The quiet window's last verdict with the figures it judged; ${RECORD_KEEPS}`),
  callbacks: z.array(z.object({ event_type: z.enum(CALLBACK_EVENT_TYPES), idempotency_key: z.string(), enqueued_at: z.string() })),
  events_received: z.number().int(),
  events_ignored: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
  session_id: z.string().nullable(),
  last_event: z.enum(LIFECYCLE_EVENTS).nullable(),
  last_event_at: z.string().nullable(),
  session_started_at: z.string().nullable(),
  idle_seen_at: z.string().nullable(),
  ended: z.boolean(),
  question: z.string().nullable(),
  question_detail: AgentQuestionSchema.nullable().optional().describe('The pending question with its choices, or the tool call a permission request is for; absent from older records'),
  usage_limit: z
    .object({ resets_at: z.string().nullable(), resumes_at: z.string(), holds_slot: z.boolean().optional().describe('false: a long wait, its slot free for other runs meanwhile') })
    .nullable()
    .optional()
    .describe("While the run waits out the model's usage limit: when the limit resets (as the tool said) and when the session resumes; absent from older records"),
  resumes: z.array(ResumeRecordSchema).optional().describe("The run's session resumed by the control plane: one entry per resume; absent from older records"),
  allowed_tools: z.array(z.string()).optional().describe('Tools allowed for the rest of the run by an answer to a permission request; absent from older records'),
  tokens_before_session: TokenUsageSchema.nullable().optional().describe("What the run's sessions before its current one spent (set by a resume); absent from older records"),
  gate_state: z.enum(GATE_STATES),
  gate_reason: z.string(),
  samples_needed: z.number().int().describe('Quiet samples the run\'s workload class needs'),
});

/** How the gate contains each run (docs/worker-gate.md#each-runs-own-cgroup). */
export const RunCgroupsStatusSchema = z
  .object({
    mode: z.enum(['v2', 'v1', 'none']),
    reason: z.string(),
    parents: z.array(z.string()),
    limits_unavailable: z.array(z.string()).describe('Limits this mode cannot apply here (a v2 controller the gate was not given)'),
  })
  .describe("How each run is contained: its own cgroup (v2 or v1) or, with 'none', its process tree, and why");
export type RunCgroupsStatus = z.output<typeof RunCgroupsStatusSchema>;

const gpuIndexList = z.array(z.number().int());

/** What the gate holds and has free for runs (docs/worker-gate.md#slots-and-gpus): its slots, its GPUs, its CPUs. */
export const GateCapacitySchema = z
  .object({
    slots: z.number().int().describe('run_slots: how many runs the gate holds at once'),
    slots_held: z.number().int().describe('Runs holding a slot now: dispatched (or being dispatched) and not settled'),
    gpus: z
      .array(
        z.object({
          index: z.number().int().describe('As nvidia-smi numbers it; what gpu_indices names'),
          uuid: z.string().nullable(),
          utilization_pct: z.number().nullable(),
          memory_used_mib: z.number().nullable(),
          memory_total_mib: z.number().nullable(),
          memory_free_mib: z.number().nullable().describe('Total less used; null where either is unknown'),
          offered: z.boolean().describe('run_gpus offers it to runs'),
          run_id: z.string().nullable().describe('The run it is pinned to; null: no run holds it'),
        }),
      )
      .describe("Every GPU of the gate's last nvidia-smi reading (one taken now when there is none yet); [] without nvidia-smi"),
    gpus_read_at: z.string().nullable().describe('When that reading was taken; null without one'),
    runs: z
      .array(
        z.object({
          run_id: z.string(),
          gpu_indices: gpuIndexList.nullable().describe('null: not pinned, it sees every GPU and holds none'),
          cpus: gpuIndexList.nullable().describe('null: not pinned to CPUs'),
        }),
      )
      .describe('The runs holding a slot, oldest first'),
    cpu_pinning: z
      .object({
        available: z.boolean().describe("Whether a dispatch's cpu_count pins the run (its cgroup's cpuset)"),
        cpus: gpuIndexList.describe('The CPUs runs may be pinned to (the cpuset of the gate\'s run cgroups); [] where pinning is not available'),
        free: gpuIndexList.describe('Of those, the ones no run holding a slot is pinned to'),
        reason: z.string().nullable().describe('Why cpu_count pins nothing here; null where it does'),
      })
      .describe('CPU pinning on this gate'),
  })
  .describe('What the gate holds and has free for runs: slots, GPUs and CPUs');

export const GateDashboardSchema = z.object({
  ok: z.boolean(),
  service: z.object({
    name: z.string(),
    role: z.string(),
    ready: z.boolean(),
    started_at: z.string(),
    project_root: z.string(),
    sample_interval_sec: z.number(),
    default_workload_class: z.enum(WORKLOAD_CLASSES),
    max_wait_after_idle_sec: z.number(),
    stale_project_process_reaper_enabled: z.boolean(),
    completion_callback_url: z.string(),
    completion_callback_fallback_urls: z.array(z.string()),
    completion_callback_token_fingerprint: z.string(),
    last_tick_error: z.string().nullable(),
    sampling: z.object({ samples: z.number().int(), cpu_ms_per_sample: z.number().nullable() }),
    run_cgroups: RunCgroupsStatusSchema,
    agent_isolation: AgentIsolationSchema.describe('What an agent of this gate can see and the user it runs as (docs/security.md#security-model)'),
  }),
  totals: z.object({
    runs: z.number().int(),
    active_or_waiting: z.number().int(),
    live: z.number().int(),
    callback_pending: z.number().int(),
  }),
  telemetry: z.object({
    sampled_at: z.string().nullable(),
    cpu_pct: z.number().nullable(),
    gpu_pct: z.number().nullable(),
    gpu_compute_pids: z.array(z.number().int()),
    vram_used_mib: z.number().nullable(),
    memory_available_mib: z.number().nullable(),
    memory_source: z.string().nullable(),
    gpu_source: z.enum(['nvidia-smi', 'none']).nullable(),
    notes: z.array(z.string()),
  }),
  capacity: GateCapacitySchema,
  runs: z.array(GateRunViewSchema),
  callbacks: z.array(
    z.object({
      idempotency_key: z.string(),
      run_id: z.string(),
      event_type: z.enum(CALLBACK_EVENT_TYPES),
      seq: z.number().int(),
      created_at: z.string(),
      attempts: z.number().int(),
      next_attempt_at: z.string(),
      last_status: z.number().int().nullable(),
      last_error: z.string().nullable(),
      delivered_at: z.string().nullable(),
    }),
  ),
  events: z.array(
    z
      .object({ at: z.string(), kind: z.string(), run_id: z.string().nullable() })
      .catchall(JsonValueSchema)
      .describe('One entry of the gate\'s event log, with the fields of its kind; open: the log keeps what the gate version that wrote it recorded'),
  ),
});
