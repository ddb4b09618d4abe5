import { z } from 'zod';
import { foreignObject, type Assert, type Documents } from '../platform/http/responses.ts';
import type { AuditEvent } from '../platform/store/audit-events.ts';

/**
 * The audit event, one schema wherever a room's answers show an event. It names every column of the row (`Documents`
 * fails the build otherwise).
 */

export const AuditEventSchema = z.object({
  id: z.number().int(),
  entity_type: z.string(),
  entity_id: z.string(),
  event_type: z.string().describe('`<entity>.<action>`, e.g. `paper_review.draft_rewritten` (docs/http.md#http-conventions)'),
  payload: foreignObject(
    'The event\'s own fields, by event_type. Open: the log is append-only, and an event keeps the fields of the version that wrote it',
  ),
  idempotency_key: z.string().nullable(),
  actor: z.string().nullable(),
  request_id: z.string().nullable(),
  created_at: z.string(),
}).meta({ id: 'AuditEvent' });
export type AuditEventDocumented = Assert<Documents<typeof AuditEventSchema, AuditEvent>>;
