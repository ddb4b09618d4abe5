import { z } from 'zod';
import { DISPATCH_MODES, LIFECYCLE_EVENTS, REASONING_EFFORTS } from '../domain/gate.ts';
import { WORKLOAD_CLASSES } from '../domain/workload.ts';

/** Request bodies of the worker gate's endpoints (interface.md "Worker gate"). */

const RUN_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;
export const RunIdSchema = z.string().regex(RUN_ID_PATTERN, 'must be 1–200 letters, digits, ".", "_", ":" or "-", starting with a letter or digit');
const ProjectIdSchema = z.string().min(1).max(200);
const PathText = z.string().min(1).max(4096).refine((v) => !v.includes('\0'), 'must not contain NUL');

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
  // Recorded in .research/project.json (decisions §5).
  workload_class: z.enum(WORKLOAD_CLASSES).optional(),
  machine_target: z.string().min(1).max(200).optional(),
});
export type PrepareProjectRequest = z.output<typeof PrepareProjectSchema>;

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
  /** Which threshold profile the quiet window uses; the gate's default_workload_class when absent. */
  workload_class: z.enum(WORKLOAD_CLASSES).optional(),
  machine_target: z.string().min(1).max(200).optional(),
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

/** Lifecycle event the agent runtime posts to `/legacy-agent/event`. */
export const ControlPlaneEventSchema = z.strictObject({
  event: z.enum(LIFECYCLE_EVENTS),
  run_id: RunIdSchema.nullish().transform((v) => v ?? undefined),
  session_id: optionalText(200),
  project_id: optionalText(200),
  project_name: optionalText(500),
  question: optionalText(20_000),
  root_pid: optionalPid,
  process_group_id: optionalPid,
  timestamp: z.iso.datetime({ offset: true }).nullish().transform((v) => v ?? undefined),
  tmux_session: optionalText(200),
  message: optionalText(20_000),
});
export type ControlPlaneEvent = z.output<typeof ControlPlaneEventSchema>;

/** @deprecated The older name of {@link ControlPlaneEventSchema}; kept for compatibility (interface.md "Versioning"). */
export const OmxEventSchema = ControlPlaneEventSchema;
/** @deprecated Use {@link ControlPlaneEvent}. */
export type OmxEvent = ControlPlaneEvent;
