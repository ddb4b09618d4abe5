import { appendAuditEvent } from '../store/audit-events.ts';
import { deleteExpiredSessions, deleteSession, insertSession } from './session-ledger.ts';
import type { Store } from '../store/store.ts';
import { randomToken, sha256Hex } from '../http/tokens.ts';

/**
 * Dashboard sessions: the cookie value is random and only its hash is stored; audit events name a session by a
 * prefix of that hash, never by the value itself.
 */

const sessionEntityId = (idHash: string) => idHash.slice(0, 16);

export interface StartedSession {
  /** The cookie value: handed to the browser once, never stored. */
  sessionId: string;
  expiresAt: Date;
}

/** Starts a session lasting `absoluteMs`, and forgets sessions idle longer than `idleMs` (logins are rare). */
export async function startDashboardSession(
  store: Store,
  options: { absoluteMs: number; idleMs: number; requestId: string },
): Promise<StartedSession> {
  const sessionId = randomToken();
  const idHash = sha256Hex(sessionId);
  const expiresAt = new Date(Date.now() + options.absoluteMs);
  await store.transaction(async (tx) => {
    await deleteExpiredSessions(tx, options.idleMs);
    await insertSession(tx, { idHash, expiresAt });
    await appendAuditEvent(tx, {
      entity_type: 'dashboard_session',
      entity_id: sessionEntityId(idHash),
      event_type: 'dashboard_session.created',
      payload: { expires_at: expiresAt.toISOString() },
      request_id: options.requestId,
    });
  });
  return { sessionId, expiresAt };
}

/** Ends the session with this id hash; ending one already gone changes nothing and records nothing. */
export async function endDashboardSession(store: Store, idHash: string, requestId: string): Promise<void> {
  await store.transaction(async (tx) => {
    if (!(await deleteSession(tx, idHash))) return;
    await appendAuditEvent(tx, {
      entity_type: 'dashboard_session',
      entity_id: sessionEntityId(idHash),
      event_type: 'dashboard_session.deleted',
      request_id: requestId,
    });
  });
}
