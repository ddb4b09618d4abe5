import type { DispatchSettings } from '../services/dispatch-settings.ts';
import type { PaperSettings } from '../services/paper-settings.ts';
import type { Store } from '../store/store.ts';
import { createAuditActivities } from './audit.ts';
import { createPaperActivities } from './papers.ts';
import { createRunActivities } from './runs.ts';
import { createCycleActivities, type CycleActivities } from './research-cycle.ts';
import type { CycleDeps } from '../services/research-cycle.ts';

/**
 * Every activity the control-plane worker registers. Workflows import only the type. The research-cycle activities
 * need the Research Facility, the provider and the paper workflows (`cycles`); a worker given none (a test's worker for
 * runs or papers alone) registers none of them.
 */
export function createActivities(deps: { store: Store; settings: DispatchSettings; papers: PaperSettings; cycles?: CycleDeps }) {
  return {
    ...createAuditActivities(deps.store),
    ...createRunActivities(deps),
    ...createPaperActivities(deps),
    ...(deps.cycles ? createCycleActivities(deps.cycles) : ({} as CycleActivities)),
  };
}

export type Activities = ReturnType<typeof createActivities>;
