import type { DispatchSettings } from '../services/dispatch-settings.ts';
import type { Store } from '../store/store.ts';
import { createAuditActivities } from './audit.ts';
import { createRunActivities } from './runs.ts';

/** Every activity the control-plane worker registers. Workflows import only the type. */
export function createActivities(deps: { store: Store; settings: DispatchSettings }) {
  return {
    ...createAuditActivities(deps.store),
    ...createRunActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
