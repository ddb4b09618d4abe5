import type { Store } from '../store/store.ts';
import { createAuditActivities } from './audit.ts';

/** Every activity the control-plane worker registers. Workflows import only the type. */
export function createActivities(deps: { store: Store }) {
  return {
    ...createAuditActivities(deps.store),
  };
}

export type Activities = ReturnType<typeof createActivities>;
