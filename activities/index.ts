import type { DispatchSettings } from '../capabilities/runs/dispatch-settings.ts';
import type { PaperSettings } from '../capabilities/papers/paper-settings.ts';
import type { Store } from '../platform/store/store.ts';
import { createAuditActivities } from './audit.ts';
import { createPaperActivities } from './papers/paper-activities.ts';
import { createRunActivities } from './runs/run-activities.ts';
import { createCycleActivities, type CycleActivities } from './automation/cycle-activities.ts';
import type { CycleDeps } from '../capabilities/automation/research-cycle.ts';
import type { PumpDeps } from '../capabilities/automation/queue-pump.ts';
import { createPumpActivities, type PumpActivities } from './automation/pump-activities.ts';
import { createAlertActivities, type AlertActivities } from './automation/queue-check-activities.ts';
import type { AlertSettings } from '../capabilities/automation/queue-alerts.ts';

/** What the automation activities (research cycles, the queue pump) need beyond the store and settings. */
export type AutomationDeps = CycleDeps & PumpDeps & { alerts: AlertSettings };

/**
 * Every activity the control-plane worker registers. Workflows import only the type. The automation activities need
 * the Research Facility, the provider and the run and paper workflows (`automation`); a worker given none (a test's
 * worker for runs or papers alone) registers none of them.
 */
export function createActivities(deps: { store: Store; settings: DispatchSettings; papers: PaperSettings; automation?: AutomationDeps }) {
  return {
    ...createAuditActivities(deps.store),
    ...createRunActivities(deps),
    ...createPaperActivities(deps),
    ...(deps.automation ? createCycleActivities(deps.automation) : ({} as CycleActivities)),
    ...(deps.automation ? createPumpActivities(deps.automation) : ({} as PumpActivities)),
    ...(deps.automation ? createAlertActivities(deps.automation) : ({} as AlertActivities)),
  };
}

export type Activities = ReturnType<typeof createActivities>;
