import { pumpDispatch, pumpFollowup, pumpGate, pumpPaperDraft, type PumpDeps } from '../services/queue-pump.ts';
import { heartbeating } from './heartbeat.ts';

/**
 * Activities of the queue pump workflow (workflows/queue-pump.ts). Each step is idempotent by business key:
 * dispatch-next by its claim and lane lease, the follow-up by the tick's idempotency key, draft-next by the paper's
 * workflow ID.
 */
export function createPumpActivities(deps: PumpDeps) {
  return {
    // Every step heartbeats: the workflow gives them all one heartbeat timeout.
    pumpGate: () => heartbeating(() => pumpGate(deps)),
    pumpDispatch: (tickId: string) => heartbeating(() => pumpDispatch(deps, tickId)),
    pumpFollowup: (tickId: string) => heartbeating(() => pumpFollowup(deps, tickId)),
    pumpPaperDraft: (tickId: string) => heartbeating(() => pumpPaperDraft(deps, tickId)),
  };
}

export type PumpActivities = ReturnType<typeof createPumpActivities>;
