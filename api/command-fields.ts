import { z } from 'zod';

/** Body fields every command route takes alike: who asked, and the key that makes a retry replay-safe. */
export const requestedBy = z.string().trim().min(1).max(200);
export const idempotencyKey = z.string().min(1).max(256);

/**
 * A live call (`dry_run` false) must carry an `idempotency_key`, as a JSON Schema rule for the OpenAPI document. The
 * body schema itself leaves the key optional and the service answers 422 naming it; this states the same rule where
 * clients and linters read the contract. For the bodies whose live call refuses to run without a key.
 */
export const LIVE_CALL_NEEDS_KEY = {
  // anyOf, not oneOf: a dry run that also carries a key is valid, and linters hold oneOf branches to exclusivity.
  anyOf: [{ properties: { dry_run: { const: true } } }, { required: ['idempotency_key'] }],
};

/** A checklist status that needs a note (CHECKLIST_STATUSES_NEEDING_A_NOTE) comes with one that is not blank. */
export const noteNeededFor = (statuses: readonly string[]) => ({
  anyOf: [{ properties: { status: { not: { enum: [...statuses] } } } }, { required: ['note'], properties: { note: { pattern: '\\S' } } }],
});
