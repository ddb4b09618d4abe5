import { z } from 'zod';
import { AGENT_NAME_PATTERN, AGENT_NAME_RULE, REASONING_EFFORTS } from '../../../worker-gate/contract/gate-names.ts';
import { WorkloadClassSchema, doc, httpUrl, nonEmptyText, optionalHttpUrl, optionalToken, text, token } from './field-kinds.ts';

export const WORKER_TARGET_ROLES = ['gpu_worker', 'cpu_worker'] as const;
/** Most slots (lanes) one worker target may declare. */
export const MAX_TARGET_SLOTS = 64;
export const WORKER_TARGET_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

export const WorkerTargetSchema = z.strictObject({
  wake_gate_url: httpUrl(),
  bearer_token: token().meta({ secret: true }),
  role: z.enum(WORKER_TARGET_ROLES),
  min_memory_available_mib: z.number().int().min(0).optional(),
  slots: z
    .number()
    .int()
    .min(1)
    .max(MAX_TARGET_SLOTS)
    .default(1)
    .describe("How many runs the target holds at once: each slot is a lane of its own (the first named as the target, the others '<target>/<n>'). Its gate's run_slots should say the same; preflight reports a mismatch."),
  gpus: z
    .union([z.literal('all'), z.array(z.number().int().min(0).max(255)).max(64).refine((list) => new Set(list).size === list.length, 'must not repeat a GPU index')])
    .default('all')
    .describe("The GPUs runs may be placed on: 'all' that its gate reports, or these indices."),
});

const WorkerTargetNameSchema = z
  .string()
  .regex(
    WORKER_TARGET_NAME_PATTERN,
    'is not a valid worker target name (letters, digits, "_", "." and "-", starting with a letter or digit)',
  );

export type WorkerTarget = z.output<typeof WorkerTargetSchema>;

/** What a run needs of its worker (docs/runs.md#slots-and-gpus); one field left out takes the class default, then none. */
export const RunNeedsSchema = z.strictObject({
  gpu_count: z.number().int().min(0).max(64).optional(),
  gpu_memory_mib: z.number().int().min(0).max(16_777_216).optional(),
  cpu_count: z.number().int().min(1).max(4096).optional(),
});
export type RunNeedsConfig = z.output<typeof RunNeedsSchema>;

/** The runs room's fields: completion callbacks, live dispatch, the worker gates and targets a run goes to, the agent settings dispatch-next may override. */
export const runsFields = {
  completion_callback_url: doc(httpUrl(), {
    perReplica: true,
    description:
      'URL that completion callbacks are posted to; the gate pushes run transcripts beside it, to the same URL with its last segment worker-transcript. Where roles holds both control_plane and worker_gate and it is left out, it is this process\'s own: http://<listen_host>:<listen_port>/control/api/worker-callback (loopback for a wildcard listen_host).',
  }),
  completion_callback_token: doc(token(), {
    description: 'Bearer token sent with completion callbacks.',
    secret: true,
  }),
  project_root: doc(nonEmptyText(), {
    perReplica: true,
    description: 'Directory under which project workspaces live. Relative paths resolve against the config file directory.',
  }),
  live_dispatch_enabled: doc(z.boolean().default(false), {
    description: 'Allow live (non-dry-run) dispatch; when false live dispatch answers 501.',
  }),
  worker_wake_gate_url: doc(optionalHttpUrl(), {
    description:
      'Base URL of the default worker gate. Where roles holds both control_plane and worker_gate and it is left out, it is this process\'s own gate: http://<listen_host>:<listen_port>.',
  }),
  worker_wake_gate_bearer_token: doc(optionalToken(), {
    description: 'Bearer token for the default worker gate; with the worker_gate role, also the token of this process\'s own gate routes (required then).',
    secret: true,
  }),
  agent_model: doc(text().regex(AGENT_NAME_PATTERN, AGENT_NAME_RULE).default(''), {
    description: "Model the agent is started with (MODEL in the dispatch script's environment); '' leaves the agent's own default. dispatch-next may override it.",
  }),
  agent_reasoning_effort: doc(z.enum(REASONING_EFFORTS).default('medium'), {
    description: 'Reasoning effort the agent is started with (REASONING_EFFORT); dispatch-next may override it.',
  }),
  agent_sandbox: doc(text().regex(AGENT_NAME_PATTERN, AGENT_NAME_RULE).default(''), {
    description: "Sandbox the agent is started in (SANDBOX); '' leaves the agent's own default. dispatch-next may override it.",
  }),
  agent_token_budget_multiple: doc(z.number().min(0).max(1000).default(2), {
    description:
      "A run's token budget: its research candidate's expected_token_budget times this. Past it, the worker gate's launcher stops a real agent (SIGINT, then SIGTERM and SIGKILL) and the run ends in gate_error; 0 sets no budget. A run without a candidate, or whose candidate names no budget, has none.",
  }),
  agent_question_wait_sec: doc(z.number().int().min(60).max(90 * 24 * 3600).default(7 * 24 * 3600), {
    description:
      "How long a run whose agent asked a question waits for the operator's answer (docs/runs.md#answering-the-agent). It keeps its lane (slot), GPUs and the agent's session meanwhile; the answer resumes that session. Past this, the run ends in gate_timeout and its item goes to needs_review, freeing the lane. Default a week.",
  }),
  default_workload_class: doc(WorkloadClassSchema.default('inference_eval'), {
    description: 'Workload class used when an item names none.',
  }),
  completion_callback_timeout_sec: doc(z.number().positive().default(120), {
    description: 'Timeout of one completion callback attempt.',
  }),
  worker_targets: doc(z.record(WorkerTargetNameSchema, WorkerTargetSchema).default({}), {
    description:
      "Named worker machines the control plane may dispatch to: each with its gate's URL and token, its role, its memory floor for preflight, how many runs it holds at once (slots: each slot a lane, the first named as the target, the others '<target>/<n>'; docs/runs.md#slots-and-gpus) and the GPUs runs may be placed on (gpus: 'all' that its gate reports, or a list of indices).",
  }),
  workload_run_needs: doc(z.partialRecord(WorkloadClassSchema, RunNeedsSchema).default({}), {
    description:
      "Workload class → what a run of the class needs when its candidate states nothing: gpu_count, gpu_memory_mib (free on each of its GPUs), cpu_count (CPUs it is pinned to). Unset: no GPU, no GPU memory, no CPU pinning.",
  }),
  workload_machine_targets: doc(z.partialRecord(WorkloadClassSchema, text().meta({ title: 'worker target name' })).default({}), {
    description: 'Workload class → worker target name; every name must be defined in worker_targets.',
  }),
};
