import type { PumpStep } from '../../workflows/automation/schedule-messages.ts';
import {
  pumpDispatch,
  pumpFollowup,
  pumpGate,
  pumpPaperDraft,
  pumpPlanPaperDraft,
  pumpRecordStep,
  pumpSelectDispatch,
  pumpSweepPaperSteps,
  type PumpDeps,
} from '../../capabilities/automation/queue-pump.ts';
import { heartbeating } from '../heartbeat.ts';

/**
 * Activities of the queue pump workflow (workflows/automation/queue-pump-workflow.ts). None starts a workflow: the tick starts its run and
 * its draft-next as children, so a retried step only selects again. The follow-up is idempotent by the tick's key, the
 * audit of a step by the tick and step.
 */
export function createPumpActivities(deps: PumpDeps) {
  return {
    // Every step heartbeats: the workflow gives them all one heartbeat timeout.
    pumpGate: () => heartbeating(() => pumpGate(deps)),
    pumpSelectDispatch: () => heartbeating(() => pumpSelectDispatch(deps)),
    pumpFollowup: (tickId: string) => heartbeating(() => pumpFollowup(deps, tickId)),
    pumpPlanPaperDraft: () => heartbeating(() => pumpPlanPaperDraft(deps)),
    pumpSweepPaperSteps: (tickId: string) => heartbeating(() => pumpSweepPaperSteps(deps, tickId)),
    pumpRecordStep: (tickId: string, step: PumpStep) => heartbeating(() => pumpRecordStep(deps, tickId, step)),
    // The dispatch and paper steps of ticks started before the child-workflows patch (workflows/patches.ts).
    pumpDispatch: (tickId: string) => heartbeating(() => pumpDispatch(deps, tickId)),
    pumpPaperDraft: (tickId: string) => heartbeating(() => pumpPaperDraft(deps, tickId)),
  };
}

export type PumpActivities = ReturnType<typeof createPumpActivities>;
