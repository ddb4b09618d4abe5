import { z } from 'zod';
import { RunCauseSchema, TokenUsageSchema } from '../../worker-gate/contract/callback-body.ts';
import { PAPER_STATUSES } from '../../capabilities/papers/domain/paper-status.ts';
import type { Assert, Documents } from '../../platform/http/responses.ts';
import type { ProjectDetail } from '../../capabilities/console/project-reads.ts';
import type { RunListRow } from '../../capabilities/runs/run-reads.ts';
import { AuditEventSchema } from '../audit-event-answer.ts';
import { PaperSchema } from '../papers/paper-answers.ts';
import { LineageSchema } from '../research/research-answers.ts';
import { ProjectSchema, QueueItemSchema, RunSchema, RunWithTransitionsSchema, WorkerObservationSchema } from '../runs/run-answers.ts';

/**
 * The answers that span rooms: a run list row carries its paper's status, and a project's detail gathers its runs,
 * papers, events, worker observations and lineage. Each is held to its read model's type (`Documents` fails the build
 * otherwise).
 */

/** A run as the run list shows it: without the gate's large answers, with its paper's status and token usage. */
export const RunListRowSchema = RunSchema.omit({ wake_gate_url: true, evidence: true, prepare_result: true, dispatch_result: true }).extend({
  workload_class: z.string(),
  paper_status: z.enum(PAPER_STATUSES).nullable().describe('The status of the run\'s paper; null when it has none'),
  token_usage: TokenUsageSchema.nullable().describe("The agent's tokens as the worker last reported them; null when it reported none"),
  cause: RunCauseSchema.nullable().describe('Why the run ended, as the worker last reported it; null when it reported none'),
});
export type RunListRowDocumented = Assert<Documents<typeof RunListRowSchema, RunListRow>>;

/** A project's detail: `GET /control/api/projects/{project_id}` and its v1 twin answer the same body. */
export const ProjectDetailAnswer = z.object({
  project: ProjectSchema.nullable(),
  queue_item: QueueItemSchema.nullable(),
  runs: z.array(RunWithTransitionsSchema),
  papers: z.array(PaperSchema),
  events: z.array(AuditEventSchema),
  worker_observations: z.array(WorkerObservationSchema),
  lineage: z.array(LineageSchema),
});
export type ProjectDetailDocumented = Assert<Documents<typeof ProjectDetailAnswer, ProjectDetail>>;
