import { appendAuditEvent, type AuditEvent, type AuditEventInput } from '../platform/store/audit-events.ts';
import type { Store } from '../platform/store/store.ts';

/** Activities that record audit events; idempotent by (event_type, idempotency_key), so retries append once. */
export function createAuditActivities(store: Store) {
  return {
    async recordAuditEvent(input: AuditEventInput & { idempotency_key: string }): Promise<AuditEvent> {
      return store.transaction((tx) => appendAuditEvent(tx, input));
    },
  };
}

export type AuditActivities = ReturnType<typeof createAuditActivities>;
