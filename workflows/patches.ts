/**
 * Patch ids of the run workflow, one per change of the commands it records (README "Changing a workflow"). Runs
 * started before a change replay its old branch; fixtures captured after it are named after the newest patch.
 *
 * The switch of the ledger steps to local activities came without a patch, and cannot get one now: histories from
 * before and after it both lack a marker, so `patched()` answers false for both. This code replays the later ones;
 * a run started on code older than that switch must finish on the code that started it.
 */
export const RUN_PATCHES = {
  /** The preflight was a local activity; it calls the worker gate over the network, so it is a normal one now. */
  preflightAsActivity: 'preflight-as-activity',
  /**
   * A finishing callback whose transitions an earlier attempt of the same workflow task already recorded (the task
   * failed after its local activities ran, e.g. when two replicas signalled the callback at once) ends the wait:
   * before, the workflow saw `applied: false` and waited for another callback that never came.
   */
  finishedRunEndsWait: 'finished-run-ends-wait',
} as const;

/** The patch the current code ends with: new history fixtures carry its id in their name. */
export const NEWEST_RUN_PATCH: string = RUN_PATCHES.finishedRunEndsWait;
