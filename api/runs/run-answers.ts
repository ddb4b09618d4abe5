import { z } from 'zod';
import { AgentQuestionSchema } from '../../worker-gate/contract/agent-question.ts';
import { PREFLIGHT_CHECK_NAMES } from '../../capabilities/runs/domain/preflight-checks.ts';
import { QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';
import { RUN_STATES } from '../../capabilities/runs/domain/run-state.ts';
import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';
import { foreignObject, type Assert, type Documents } from '../../platform/http/responses.ts';
import type { ProjectRun } from '../../capabilities/console/project-reads.ts';
import type { ProjectRow } from '../../capabilities/runs/projects.ts';
import type { QueueItemRow } from '../../capabilities/runs/queue-items.ts';
import type { WorkerObservation } from '../../capabilities/runs/worker-observations.ts';

/**
 * The runs room's answers: the work ledger a dispatch claims from (projects, queue items, the queue's flags), runs,
 * worker observations and dispatch routes. A row is this schema wherever it appears, in any room's answers, and each
 * names every column its row type has (`Documents` fails the build otherwise).
 */

export const QueueItemSchema = z.object({
  project_id: z.string(),
  project_name: z.string(),
  status: z.enum(QUEUE_STATUSES),
  manual_review_required: z.boolean(),
  dispatch_priority: z.number().int().describe('Lower goes first'),
  selection_rank: z.number().int(),
  machine_target: z.string().nullable(),
  workload_class: z.enum(WORKLOAD_CLASSES),
  current_run_id: z.string().nullable(),
  last_run_state: z.string().nullable(),
  next_action_hint: z.string().nullable(),
  last_error: z.string().nullable(),
  candidate_id: z.string().nullable(),
  lane: z.string().nullable().describe('The worker target the item was last claimed on'),
  dispatch_failures: z.number().int().describe('Failed dispatch attempts in a row; the third moves the item to dispatch_error'),
  gpu_count: z.number().int().nullable().describe("GPUs a run of the item needs; null: its workload class's default (docs/runs.md#slots-and-gpus)"),
  gpu_memory_mib: z.number().int().nullable().describe("GPU memory (MiB) a run needs free on each of its GPUs; null: its workload class's default"),
  cpu_count: z.number().int().nullable().describe("CPUs a run is pinned to; null: its workload class's default"),
  created_at: z.string(),
  updated_at: z.string(),
}).meta({ id: 'QueueItem' });
export type QueueItemDocumented = Assert<Documents<typeof QueueItemSchema, QueueItemRow>>;

export const FlagsSchema = z.object({ queue_paused: z.boolean(), maintenance_mode: z.boolean() });

export const ProjectSchema = z.object({
  project_id: z.string(),
  project_name: z.string(),
  project_dir: z.string().describe('Relative to the worker\'s project_root'),
  idea_id: z.string().nullable(),
  candidate_id: z.string().nullable(),
  workload_class: z.enum(WORKLOAD_CLASSES),
  machine_target: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
}).meta({ id: 'Project' });
export type ProjectDocumented = Assert<Documents<typeof ProjectSchema, ProjectRow>>;

export const GATE_ANSWER = 'Open: the worker gate decides its shape, and a gate of another implementation may answer differently (docs/worker-gate.md#worker-gate)';

/** Every column of a run. */
export const RunSchema = z.object({
  run_id: z.string(),
  project_id: z.string(),
  workflow_id: z.string(),
  state: z.enum(RUN_STATES),
  lane: z.string(),
  wake_gate_url: z.string(),
  workload_class: z.enum(WORKLOAD_CLASSES),
  requested_by: z.string(),
  session_id: z.string().nullable(),
  question: z.string().nullable().describe("The question the agent waits on, as text; null when none waits"),
  question_detail: AgentQuestionSchema.nullable().describe("The waiting question's choices, or the tool call a permission request is for; null when none waits, or the agent's tool gave no detail"),
  usage_limit: z
    .object({
      resets_at: z.string().nullable().describe('When the limit resets, as the tool said; null when it named no time'),
      resumes_at: z.string().describe("When the run's session resumes by itself"),
      holds_slot: z.boolean().optional().describe('false: a long wait, whose lane is free for other items until the run takes it back'),
    })
    .nullable()
    .describe("While the run waits out the model's usage limit (state usage_limited); null otherwise"),
  decision: z.string().nullable(),
  decision_summary: z.string().nullable(),
  evidence: foreignObject(`The evidence the completion callback carried. ${GATE_ANSWER}`).nullable(),
  prepare_result: foreignObject(`The gate's answer to /prepare-project. ${GATE_ANSWER}`).nullable(),
  dispatch_result: foreignObject(`The gate's answer to /dispatch. ${GATE_ANSWER}`).nullable(),
  last_error: z.string().nullable(),
  finished_at: z.string().nullable(),
  gpu_indices: z.array(z.number().int()).nullable().describe('The GPUs the run was placed on ([]: none visible to it); null: not pinned'),
  cpu_count: z.number().int().nullable().describe('How many CPUs its gate pins it to; null: not pinned'),
  created_at: z.string(),
  updated_at: z.string(),
}).meta({ id: 'Run' });

export const TransitionSchema = z.object({
  transition: z.string(),
  from_state: z.string().nullable(),
  to_state: z.string(),
  queue_status: z.enum(QUEUE_STATUSES).nullable(),
  created_at: z.string(),
}).meta({ id: 'Transition' });

/** A run with the transitions applied to it, in order (a project's and a run's detail). */
export const RunWithTransitionsSchema = RunSchema.extend({ transitions: z.array(TransitionSchema) });
export type RunDocumented = Assert<Documents<typeof RunWithTransitionsSchema, ProjectRun>>;

export const PreflightCheckSchema = z.object({
  name: z.enum(PREFLIGHT_CHECK_NAMES),
  ok: z.boolean(),
  detail: z.string().describe('One readable sentence'),
  data: foreignObject(`The figures the check judged, as the gate reported them. ${GATE_ANSWER}`),
}).meta({ id: 'PreflightCheck' });

export const WorkerObservationSchema = z.object({
  observation_id: z.number().int(),
  target: z.string(),
  wake_gate_url: z.string(),
  ok: z.boolean(),
  summary: z.string(),
  checks: z.array(PreflightCheckSchema),
  run_id: z.string().nullable().describe('The run whose dispatch ran this preflight'),
  observed_at: z.string(),
}).meta({ id: 'WorkerObservation' });
export type WorkerObservationDocumented = Assert<Documents<typeof WorkerObservationSchema, WorkerObservation>>;

const WORKER_ROLES = ['gpu_worker', 'cpu_worker'] as const;

/** The worker target a queue item is (or would be) dispatched to: dispatch-next, a lane and a cycle's stage show it. */
export const DispatchRouteSchema = z.object({
  machine_target: z.string(),
  lane: z.string().describe("The target's slot the run is claimed on: the target's name for its first slot, '<target>/<n>' for the others"),
  slot: z.number().int().describe('1-based'),
  wake_gate_url: z.string(),
  worker_role: z.enum(WORKER_ROLES),
  token_configured: z.boolean(),
});
