/**
 * Patch ids, one per change of the commands a workflow records (docs/architecture.md#changing-a-workflow). Workflows started
 * before a change replay its old branch; fixtures captured after it are named after the patch.
 *
 * The run workflow's patches come first. Its switch of the ledger steps to local activities came without a patch, and
 * cannot get one now: histories from before and after it both lack a marker, so `patched()` answers false for both.
 * This code replays the later ones; a run started on code older than that switch must finish on the code that started
 * it.
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
  /**
   * A cancel during the dispatch waits for the dispatch call to end (it aborts on the cancel) before the workflow
   * records the cancel and stops the run on the gate; before, it went on at once, and its stop could reach the gate
   * ahead of the dispatch, which then started an agent on a lane the ledger showed free.
   */
  dispatchAwaitsCancel: 'dispatch-awaits-cancel',
  /**
   * The agent's question no longer ends the run: the run keeps its lane and waits for the operator's answer, which
   * resumes the agent's session on its gate (docs/runs.md#answering-the-agent). Before, the question ended the wait
   * and the item went to needs_review.
   */
  answersResumeSession: 'answers-resume-session',
  /**
   * A model's usage limit no longer ends the run: it waits, keeping its lane, until the limit resets (or an operator
   * resumes it), then the gate resumes the session (docs/runs.md#waiting-out-a-usage-limit). Before, gates had no
   * usage_limited callback, and the limit's end came as gate_error.
   */
  usageLimitWaits: 'usage-limit-waits',
} as const;

/** The patch the current code ends with: new history fixtures carry its id in their name. */
export const NEWEST_RUN_PATCH: string = RUN_PATCHES.usageLimitWaits;

/**
 * Patch ids of the queue pump tick. A tick lives seconds, but a tick in flight across an upgrade replays its old
 * branch, and the stored history of a tick from before the change replays in the tests.
 */
export const PUMP_PATCHES = {
  /**
   * The dispatch step selects in an activity and starts the run as the tick's child; the paper step starts a
   * draft-next as its child and does not wait for it. Before, both were client calls from activities, which a retry
   * could repeat and which held the tick (and every idle lane) while a paper was written.
   */
  childWorkflows: 'pump-child-workflows',
  /**
   * Each open tick sweeps the paper steps whose workflow closed without finishing or abandoning them (terminated, timed
   * out), giving their papers back; before, such a paper stayed in a `*_generating` status for good.
   */
  paperStepSweep: 'pump-paper-step-sweep',
} as const;

/** Patch ids of the research cycle. */
export const CYCLE_PATCHES = {
  /**
   * The paper and rewrite stages are child workflows the cycle waits on, so a stage reports its child's real outcome
   * after a crash; before, they were client calls from activities, reported as `interrupted` after one.
   */
  childWorkflows: 'cycle-child-workflows',
  /**
   * A cycle canceled while it waits on its paper or rewrite stage ends canceled; before, the stage reported its canceled
   * child as failed, and a cycle with no stage left after it completed as if nothing had been canceled.
   */
  cancellation: 'cycle-cancellation',
} as const;

/** Patch ids of the paper workflows. */
export const PAPER_PATCHES = {
  /**
   * Evidence holding this service's secret values ends the step as `held_for_review` (the paper waits for a person),
   * and a draft-next stops at such a candidate; before, such evidence was drafted like any other.
   */
  evidenceSecrets: 'paper-evidence-secrets',
  /**
   * A canceled step gives its paper back: the paper workflow abandons the step in a scope the cancellation does not
   * reach before it ends canceled, and a canceled rewrite batch ends canceled instead of reporting each paper failed.
   * Before, the paper stayed in draft_generating or publication_generating for good.
   */
  stepCancellation: 'paper-step-cancellation',
} as const;
