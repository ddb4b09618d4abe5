import { randomUUID } from 'node:crypto';
import { lanesMissingOnSomeReplica } from '../../platform/cluster/replica-ledger.ts';
import { REPLICA_LOST_AFTER_MS } from '../../platform/cluster/replicas.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import type { PlacedCandidate } from './run-placements.ts';
import type { FoundCandidate } from './dispatch-choice.ts';
import type { DispatchSettings } from './dispatch-settings.ts';
import { leasedLanes, releaseLaneLease, renewLaneLease, takeLaneLease } from './store/lane-leases.ts';

/**
 * The lanes a dispatch-next call may dispatch to: those no other call holds and every replica knows, and the lease a
 * live call takes on its lane for as long as it waits for the run's outcome.
 */

/**
 * A lane lease lasts this long and is renewed every LEASE_RENEW_MS while its call waits for the outcome, so the lease of
 * a call whose process died lapses within seconds and another replica can dispatch to the lane again.
 */
export const LANE_LEASE_TTL_MS = 10_000;
const LEASE_RENEW_MS = 3_000;

/** Keeps `holder`'s lease on `lane` from lapsing until the returned function is called. */
export function keepLeased(store: Store, lane: string, holder: string): () => void {
  const timer = setInterval(() => {
    // A renewal that fails (the store briefly unreachable) is tried again at the next tick, within the lease's life.
    renewLaneLease(store, lane, holder, LANE_LEASE_TTL_MS).catch(() => undefined);
  }, LEASE_RENEW_MS);
  return () => clearInterval(timer);
}

/**
 * Lanes no call may dispatch to now: those another call holds a lease on, and those some live control-plane replica
 * has not configured (a worker target being added one replica at a time): any replica's worker may run the run's
 * activities, so a lane must be known to all of them first. `notEverywhere` names the latter, for the answer.
 */
export async function unavailableLanes(store: Queryable, settings: DispatchSettings): Promise<{ all: Set<string>; notEverywhere: Set<string> }> {
  const [leased, notEverywhere] = await Promise.all([leasedLanes(store), lanesMissingOnSomeReplica(store, [...settings.routing.lanes.keys()], REPLICA_LOST_AFTER_MS)]);
  return { all: new Set([...leased, ...notEverywhere]), notEverywhere };
}

/** A search for a candidate that passes over the lanes in `skip` (held by other calls, or not everywhere configured). */
export type CandidateSearch = (skip: ReadonlySet<string>) => Promise<FoundCandidate>;

/**
 * The candidate of a live call, with its lane leased to this call (capabilities/runs/store/lane-leases.ts). A lane another call holds
 * is passed over for the next idle one. Once leased, the lane's candidate is searched again: the one seen before the
 * lease may have been dispatched (and even finished) by the call that held the lane meanwhile. Null when no idle lane
 * has a candidate that fits.
 */
export async function leaseCandidate(
  deps: { store: Store; settings: DispatchSettings },
  first: PlacedCandidate | null,
  search: CandidateSearch,
): Promise<{ next: PlacedCandidate; holder: string } | null> {
  const { store, settings } = deps;
  const lanes = [...settings.routing.lanes.keys()];
  const holder = randomUUID();
  const skip = new Set<string>();
  let seen = first;
  for (let tries = 0; seen && tries <= lanes.length; tries += 1) {
    const lane = seen.lane;
    if (await takeLaneLease(store, lane, holder, LANE_LEASE_TTL_MS)) {
      const fresh = (await search(new Set(lanes.filter((other) => other !== lane)))).next;
      if (fresh) return { next: fresh, holder };
      await releaseLaneLease(store, lane, holder);
    }
    skip.add(lane);
    seen = (await search(new Set([...skip, ...(await unavailableLanes(store, settings)).all]))).next;
  }
  return null;
}
