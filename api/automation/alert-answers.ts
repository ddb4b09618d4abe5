import { z } from 'zod';
import { FINDING_KINDS } from '../../capabilities/automation/domain/alert-findings.ts';

/** What a queue check found: the same shape in its answer and in the checks queue health reads back. */
export const AlertFindingSchema = z.object({
  kind: z.enum(FINDING_KINDS),
  severity: z.enum(['critical', 'warning', 'info']),
  entity_type: z.enum(['run', 'queue_item', 'worker']),
  entity_id: z.string(),
  message: z.string(),
  first_seen_at: z.string(),
}).meta({ id: 'AlertFinding' });
