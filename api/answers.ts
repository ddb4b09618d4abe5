import { z } from 'zod';
import { PAPER_STATUSES, REVIEW_STATUSES } from '../domain/paper-status.ts';
import { anyObject, openObject } from '../http/responses.ts';

/** Rows several control-plane answers share; open, since the ledgers may add columns. */

export const AuditEventSchema = openObject({
  id: z.number().int(),
  entity_type: z.string(),
  entity_id: z.string(),
  event_type: z.string(),
  payload: anyObject(),
  idempotency_key: z.string().nullable(),
  actor: z.string().nullable(),
  request_id: z.string().nullable(),
  created_at: z.string(),
});

export const QueueItemSchema = openObject({
  project_id: z.string(),
  project_name: z.string(),
  status: z.string(),
});

export const FlagsSchema = openObject({ queue_paused: z.boolean(), maintenance_mode: z.boolean() });

/** A paper as the paper lists, project detail and run detail show it (README "Papers"). */
export const PaperSchema = openObject({
  paper_id: z.string(),
  project_id: z.string(),
  run_id: z.string(),
  paper_status: z.enum(PAPER_STATUSES),
  review_status: z.enum(REVIEW_STATUSES),
  rank_score: z.number(),
  updated_at: z.string(),
});

/** A project's detail: `GET /control/api/projects/{project_id}` and its v1 twin answer the same body. */
export const ProjectDetailAnswer = openObject({
  project: anyObject().nullable(),
  queue_item: QueueItemSchema.nullable(),
  runs: z.array(anyObject()),
  papers: z.array(PaperSchema),
  events: z.array(AuditEventSchema),
  worker_observations: z.array(anyObject()),
  lineage: z.array(anyObject()),
});
