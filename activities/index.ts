import type { DispatchSettings } from '../services/dispatch-settings.ts';
import type { PaperSettings } from '../services/paper-settings.ts';
import type { Store } from '../store/store.ts';
import { createAuditActivities } from './audit.ts';
import { createPaperActivities } from './papers.ts';
import { createRunActivities } from './runs.ts';

/** Every activity the control-plane worker registers. Workflows import only the type. */
export function createActivities(deps: { store: Store; settings: DispatchSettings; papers: PaperSettings }) {
  return {
    ...createAuditActivities(deps.store),
    ...createRunActivities(deps),
    ...createPaperActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
