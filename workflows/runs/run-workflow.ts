import {
  ActivityCancellationType,
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { RunActivities, TransitionOutcome } from '../../activities/runs/run-activities.ts';
import { GATE_NON_RETRYABLE, gateFailureDetails, LEDGER_NON_RETRYABLE, RUN_LEDGER_FAILED, type RunLedgerFailureDetails } from '../../capabilities/runs/domain/run-failures.ts';
import { CALLBACK_TRANSITIONS, type RunTransition } from '../../capabilities/runs/domain/run-state.ts';
import type { TransitionDetail } from '../../capabilities/runs/run-ledger.ts';
import {
  dispatchOutcomeUpdate,
  PROJECT_ID_ATTRIBUTE,
  QUEUE_STATUS_ATTRIBUTE,
  workerCallbackSignal,
  type DispatchOutcome,
  answerSignal,
  resumeNowSignal,
  type ResumeNow,
  type RunAnswer,
  type RunCallback,
  type RunProgress,
  type RunWorkflowInput,
  type RunWorkflowResult,
} from './run-messages.ts';
import { RUN_PATCHES } from '../patches.ts';
import { LIMIT_RESUME_PREFIX, USAGE_LIMIT_RESUME_PROMPT } from '../../worker-gate/contract/usage-limit.ts';

/**
 * One run of a queued item (docs/runs.md#runs): claim → preflight → prepare → dispatch on the worker gate, then wait for
 * the gate's completion callbacks (signals) up to a durable deadline, and move the run and its queue row through their
 * states. Every state change is one idempotent activity, so a replayed or retried step changes nothing twice.
 *
 * Runs in flight replay their history against this code: a change to the commands it records goes behind `patched()`
 * (docs/architecture.md#changing-a-workflow).
 */

type LedgerActivities = Pick<RunActivities, 'claimRun' | 'transitionRun' | 'retakeLane'>;
type PreflightActivities = Pick<RunActivities, 'preflightRun'>;
type GateActivities = Pick<RunActivities, 'prepareRun' | 'dispatchRun' | 'cancelOnWorker' | 'resumeOnWorker'>;

// Ledger writes are short database writes in the worker's own process: as local activities they cost no round trip
// through the task queue. Each is idempotent by business key, so a re-run after a crash changes nothing twice. Their
// tries are bounded (about three minutes in all): a ledger that stays unreachable fails the workflow (see `recorded`).
const LEDGER_OPTIONS = {
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    maximumAttempts: 10,
    nonRetryableErrorTypes: LEDGER_NON_RETRYABLE,
  },
};
/** A ledger step with the summary the Temporal UI shows on its event (the same commands: a summary is metadata). */
const ledger = (summary: string) => proxyLocalActivities<LedgerActivities>({ ...LEDGER_OPTIONS, summary });

/**
 * The gate calls and the preflight heartbeat every second (activities/runs/run-activities.ts): a worker that dies mid-call is noticed
 * after this, not after the call's whole start-to-close timeout, and the call goes to the restarted worker.
 */
const ACTIVITY_HEARTBEAT_TIMEOUT = '3 seconds';

const PREFLIGHT_OPTIONS = {
  startToCloseTimeout: '60 seconds',
  heartbeatTimeout: ACTIVITY_HEARTBEAT_TIMEOUT,
  retry: { maximumAttempts: 3 },
};
const preflight = proxyActivities<PreflightActivities>(PREFLIGHT_OPTIONS);
/** How runs started before the preflight-as-activity patch preflight (and replay). */
const preflightBeforePatch = proxyLocalActivities<PreflightActivities>(PREFLIGHT_OPTIONS);

type Phase = RunProgress['phase'];

/** A resume may first wait, up to 15 s on the gate, for the asking session's processes to end (docs/worker-gate.md#resuming-a-run). */
const RESUME_SLACK_SEC = 20;

/** How often a run back from a long usage-limit wait tries again to take its lane while another item runs there. */
const LANE_RETAKE_RETRY_MS = 15_000;

/** How long a run waits out a usage limit its gate named no resume time for (a gate of another implementation). */
const DEFAULT_LIMIT_WAIT_SEC = 15 * 60;

/** How long a run started without question_wait_sec in its timings waits for an answer: a week. */
const DEFAULT_QUESTION_WAIT_SEC = 7 * 24 * 3600;

/** One line of Temporal markdown: where the run is, for the workflow's page in the Temporal UI. */
function currentDetails(progress: RunProgress): string {
  const parts = [`**${progress.phase.replaceAll('_', ' ')}**`];
  if (progress.run_state) parts.push(`run ${progress.run_state}`);
  if (progress.queue_status) parts.push(`queue ${progress.queue_status}`);
  parts.push(`${progress.callbacks_seen} callback(s)`);
  if (progress.outcome) parts.push(`dispatch ${progress.outcome.replaceAll('_', ' ')}`);
  return parts.join(' · ');
}

export async function runWorkflow(input: RunWorkflowInput): Promise<RunWorkflowResult> {
  const { run_id: runId, timings } = input;
  const workflowId = workflowInfo().workflowId;
  const gateOptions = {
    startToCloseTimeout: `${timings.gate_call_timeout_sec + 5} seconds`,
    heartbeatTimeout: ACTIVITY_HEARTBEAT_TIMEOUT,
    retry: {
      maximumAttempts: timings.gate_call_attempts,
      initialInterval: `${timings.gate_retry_initial_sec} seconds`,
      backoffCoefficient: 2,
      nonRetryableErrorTypes: GATE_NON_RETRYABLE,
    },
  };
  const gate = proxyActivities<GateActivities>(gateOptions);
  /**
   * The dispatch as a cancel waits for it to end: the call aborts on the cancel (activities/runs/run-activities.ts), and only then
   * does the workflow ask the gate to stop the run, so the stop can no longer overtake the dispatch on its way there.
   */
  const dispatchAwaitingCancel = proxyActivities<Pick<GateActivities, 'dispatchRun'>>({ ...gateOptions, cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED });

  let outcome: DispatchOutcome | undefined;
  /** Set once /dispatch may have started an agent: a cancel must then stop it on the worker. */
  let dispatchSent = false;
  const progress: RunProgress = { run_id: runId, phase: 'claiming', run_state: null, queue_status: null, callbacks_seen: 0, outcome: null };
  const seenKeys = new Set<string>();
  const inbox: RunCallback[] = [];
  /** The operator's answers by number: the answer to the run's n-th question is n. */
  const answers = new Map<number, RunAnswer>();
  /** How many questions the agent has asked in this run. */
  let questionsAsked = 0;
  /** How many times the gate continued the run's session after a premature stop. */
  let continuations = 0;
  /** How many usage limits the run has waited out, and the operators' requests to resume before the reset. */
  let limitsWaited = 0;
  const resumeRequests = new Map<number, ResumeNow>();

  setHandler(dispatchOutcomeUpdate, async () => {
    await condition(() => outcome !== undefined);
    return outcome!;
  });
  /** The run's phase as the Temporal UI shows it on the workflow (its current details), kept up to date. */
  const showProgress = () => setCurrentDetails(currentDetails(progress));
  showProgress();
  setHandler(workerCallbackSignal, (callback) => {
    // The HTTP layer may deliver one callback more than once (a retried signal); act on each key once.
    if (seenKeys.has(callback.idempotency_key)) return;
    seenKeys.add(callback.idempotency_key);
    progress.callbacks_seen += 1;
    showProgress();
    inbox.push(callback);
  });

  setHandler(answerSignal, (answer) => {
    if (!answers.has(answer.answer_number)) answers.set(answer.answer_number, answer);
  });
  setHandler(resumeNowSignal, (request) => {
    if (!resumeRequests.has(request.limit_number)) resumeRequests.set(request.limit_number, request);
  });

  const settle = (value: DispatchOutcome) => {
    outcome ??= value;
    progress.outcome = outcome.action;
    showProgress();
  };
  const enter = (phase: Phase) => {
    progress.phase = phase;
    showProgress();
  };
  const transition = async (name: RunTransition, detail?: TransitionDetail, occurrence?: number): Promise<TransitionOutcome> => {
    const summary = occurrence && occurrence > 1 ? `${name} (${occurrence}): run ${runId}` : `${name}: run ${runId}`;
    const result = await recorded(name, () =>
      ledger(summary).transitionRun({ run_id: runId, transition: name, ...(detail ? { detail } : {}), ...(occurrence ? { occurrence } : {}) }),
    );
    progress.run_state = result.run_state;
    if (result.queue_status) {
      progress.queue_status = result.queue_status;
      upsertSearchAttributes([{ key: QUEUE_STATUS_ATTRIBUTE, value: result.queue_status }]);
    }
    showProgress();
    return result;
  };
  const finish = async (): Promise<RunWorkflowResult> => {
    enter('finished');
    // Answer an outcome update that is still being handled before the workflow closes.
    await condition(allHandlersFinished);
    return { run_id: runId, dispatch: outcome!, run_state: progress.run_state, queue_status: progress.queue_status };
  };

  upsertSearchAttributes([{ key: PROJECT_ID_ATTRIBUTE, value: input.project_id }]);
  try {
    const claim = await recorded('claim', () =>
      ledger(`claim ${input.project_id} on ${input.lane}`).claimRun({ run_id: runId, workflow_id: workflowId, project_id: input.project_id, lane: input.lane, requested_by: input.requested_by }),
    );
    if (!claim.claimed) {
      settle({ action: 'dispatch_blocked', reason: `claim lost: ${claim.reason}` });
      return await finish();
    }
    progress.run_state = 'dispatching';
    progress.queue_status = 'dispatching';
    showProgress();
    upsertSearchAttributes([{ key: QUEUE_STATUS_ATTRIBUTE, value: 'dispatching' }]);

    enter('preflight');
    const preflightRun = patched(RUN_PATCHES.preflightAsActivity) ? preflight.preflightRun : preflightBeforePatch.preflightRun;
    const checked = await preflightRun({ run_id: runId, lane: input.lane });
    if (!checked.ok) {
      await transition('dispatch_failed', { last_error: `preflight failed: ${checked.summary}`, audit: { stage: 'preflight' } });
      settle({ action: 'dispatch_blocked', reason: `preflight failed: ${checked.summary}`, preflight: checked });
      return await finish();
    }

    if (await prepareAndDispatch()) {
      enter('awaiting_callbacks');
      await awaitCompletion();
    }
    return await finish();
  } catch (error) {
    if (!isCancellation(error)) throw error;
    await CancellationScope.nonCancellable(async () => {
      await transition('canceled', { last_error: 'canceled by an operator' });
      // A worker that cannot be reached keeps its agent; the failed attempts stay visible in the workflow history.
      if (dispatchSent) await gate.cancelOnWorker({ run_id: runId, timeout_sec: timings.gate_call_timeout_sec }).catch(() => undefined);
    });
    settle({ action: 'canceled', reason: 'the run was canceled before the worker accepted it' });
    throw error;
  }

  /**
   * A ledger step whose tries ran out, or that can never succeed, fails the workflow with RunLedgerFailed, naming the
   * run and the step: visible in Temporal and to the dispatch-next call still waiting. The ledger keeps the run's last
   * recorded state (the ledger is what failed, so nothing more can be written there); an operator's cancel then
   * records the cancel itself, since no workflow is left, and frees the lane.
   */
  async function recorded<T>(step: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (error) {
      // A local activity's failure may arrive as the activity's own ApplicationFailure, without an ActivityFailure around it.
      if (isCancellation(error) || !(error instanceof ActivityFailure || error instanceof ApplicationFailure)) throw error;
      const cause = error instanceof ActivityFailure ? (error.cause ?? error) : error;
      throw ApplicationFailure.create({
        type: RUN_LEDGER_FAILED,
        message: `run ${runId}: ${step} could not be recorded: ${cause.message}`,
        nonRetryable: true,
        // The step, for the dispatch call still waiting (capabilities/runs/run-workflows.ts): the workflow's failure is its answer.
        details: [{ step, reason: cause.message } satisfies RunLedgerFailureDetails],
        cause: error,
      });
    }
  }

  /** Prepare then dispatch, each with bounded retries; a failure releases the claim. True when the worker accepted. */
  async function prepareAndDispatch(): Promise<boolean> {
    let stage: 'prepare' | 'dispatch' = 'prepare';
    try {
      enter('preparing');
      const prepared = await gate.prepareRun({ run_id: runId, timeout_sec: timings.gate_call_timeout_sec });
      await transition('prepared', { prepare_result: prepared });
      stage = 'dispatch';
      enter('dispatching');
      dispatchSent = true;
      const dispatchRun = patched(RUN_PATCHES.dispatchAwaitsCancel) ? dispatchAwaitingCancel.dispatchRun : gate.dispatchRun;
      const dispatched = await dispatchRun({ run_id: runId, timeout_sec: timings.gate_call_timeout_sec, agent: input.agent });
      await transition('worker_accepted', { dispatch_result: dispatched });
      settle({ action: 'live_dispatch', run_id: runId, workflow_id: workflowId, prepare: prepared, dispatch: dispatched });
      return true;
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      const failure = error.cause instanceof ApplicationFailure ? error.cause : undefined;
      const { status } = gateFailureDetails(failure?.details);
      const reason = failure?.message ?? error.message;
      const released = await transition('dispatch_failed', { last_error: `${stage} failed: ${reason}`, audit: { stage, status } });
      settle({ action: 'dispatch_failed', reason, stage, status, queue_status: released.queue_status });
      return false;
    }
  }

  /** Acts on callbacks in arrival order until one finishes the run, or gives up at the deadline. */
  async function awaitCompletion(): Promise<void> {
    // Any callback shows the run is alive on its worker, so each one restarts the wait.
    let deadline = Date.now() + timings.completion_wait_sec * 1000;
    for (;;) {
      const remaining = deadline - Date.now();
      const arrived = remaining > 0 && (await condition(() => inbox.length > 0, remaining));
      if (!arrived) {
        await transition('completion_timeout', { last_error: `no finishing callback within ${timings.completion_wait_sec} s` });
        return;
      }
      const callback = inbox.shift()!;
      if (await applyCallback(callback)) return;
      deadline = Date.now() + timings.completion_wait_sec * 1000;
    }
  }

  /**
   * The agent asked: the run keeps its lane and waits for the operator's answer, then the gate resumes the agent's
   * session with it (docs/runs.md#answering-the-agent). True when the session resumed, false when the run ended here
   * (no answer within question_wait_sec, or the gate could not resume it).
   */
  async function awaitAnswer(callback: RunCallback, audit: Record<string, unknown>): Promise<boolean> {
    const number = questionsAsked + 1;
    const asked = await transition('question_asked', { session_id: callback.session_id, question: callback.question, question_detail: callback.question_detail ?? null, audit }, number);
    if (!asked.applied && asked.run_state !== 'question_pending') return false;
    questionsAsked = number;
    enter('awaiting_answer');
    const waitSec = timings.question_wait_sec ?? DEFAULT_QUESTION_WAIT_SEC;
    if (!(await condition(() => answers.has(number), waitSec * 1000))) {
      await transition('question_unanswered', { last_error: `the agent's question was not answered within ${waitSec} s` });
      return false;
    }
    const answer = answers.get(number)!;
    const resumed = await resumeSession({ resume_id: `answer-${number}`, prompt: answer.prompt, allowed_tools: answer.allowed_tools }, 'the answer', { answer_number: number });
    if (!resumed) return false;
    await transition('answered', { clears_question: true, audit: { answer_number: number } }, number);
    enter('awaiting_callbacks');
    return true;
  }

  /**
   * The model refused for a usage limit: the run waits until its gate's resume time, or until an operator resumes it,
   * keeping its lane (a long wait lets it go and takes it back then), and the gate resumes the session
   * (docs/runs.md#waiting-out-a-usage-limit). True when the session resumed, false when the run ended here.
   */
  async function awaitLimitReset(callback: RunCallback, audit: Record<string, unknown>): Promise<boolean> {
    const number = limitsWaited + 1;
    const resumesAt = callback.usage_limit?.resumes_at ?? new Date(Date.now() + DEFAULT_LIMIT_WAIT_SEC * 1000).toISOString();
    const usageLimit = { resets_at: callback.usage_limit?.resets_at ?? null, resumes_at: resumesAt, holds_slot: callback.usage_limit?.holds_slot ?? true };
    const limited = await transition('usage_limited', { session_id: callback.session_id, usage_limit: usageLimit, audit: { ...audit, ...usageLimit } }, number);
    if (!limited.applied && limited.run_state !== 'usage_limited') return false;
    limitsWaited = number;
    enter('awaiting_limit_reset');
    const waitMs = Date.parse(resumesAt) - Date.now();
    if (waitMs > 0) await condition(() => resumeRequests.has(number), waitMs);
    const early = resumeRequests.get(number);
    if (!usageLimit.holds_slot && !(await retakeLane(number))) return false;
    const resumed = await resumeSession({ resume_id: `${LIMIT_RESUME_PREFIX}${number}`, prompt: USAGE_LIMIT_RESUME_PROMPT, allowed_tools: [] }, 'the usage limit\'s end', { limit_number: number });
    if (!resumed) return false;
    await transition('limit_resumed', { usage_limit: null, audit: { limit_number: number, ...(early ? { resumed_early_by: early.requested_by } : {}) } }, number);
    enter('awaiting_callbacks');
    return true;
  }

  /**
   * Takes back the lane a long usage-limit wait let go, trying again while another item runs there. False when it never
   * can (the run's item moved on): the run then ends here.
   */
  async function retakeLane(limitNumber: number): Promise<boolean> {
    enter('retaking_lane');
    for (;;) {
      const retake = await recorded('retake lane', () => ledger(`retake lane: run ${runId}`).retakeLane({ run_id: runId }));
      if (retake.retaken) return true;
      if (retake.lost) {
        await transition('resume_failed', { last_error: `the run could not take its lane back after its usage limit: ${retake.reason}`, audit: { limit_number: limitNumber } });
        return false;
      }
      await sleep(LANE_RETAKE_RETRY_MS);
    }
  }

  /** Asks the gate to resume the run's session; a gate that cannot ends the run (resume_failed). True when it resumed. */
  async function resumeSession(resume: { resume_id: string; prompt: string; allowed_tools: RunAnswer['allowed_tools'] }, what: string, audit: Record<string, unknown>): Promise<boolean> {
    enter('resuming');
    try {
      const timeoutSec = timings.gate_call_timeout_sec + RESUME_SLACK_SEC;
      const resumeGate = proxyActivities<Pick<GateActivities, 'resumeOnWorker'>>({ ...gateOptions, startToCloseTimeout: `${timeoutSec + 5} seconds` });
      await resumeGate.resumeOnWorker({ run_id: runId, timeout_sec: timeoutSec, ...resume });
      return true;
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      const failure = error.cause instanceof ApplicationFailure ? error.cause : undefined;
      await transition('resume_failed', { last_error: `${what} could not resume the agent's session: ${failure?.message ?? error.message}`, audit });
      return false;
    }
  }

  /** True when the callback finished the run. */
  async function applyCallback(callback: RunCallback): Promise<boolean> {
    const audit = { callback: callback.idempotency_key, gate_state: callback.gate_state, reason: callback.reason };
    const name = CALLBACK_TRANSITIONS[callback.event_type];
    switch (callback.event_type) {
      case 'session_started':
        await transition(name, { session_id: callback.session_id, audit });
        return false;
      case 'session_continued':
        continuations += 1;
        await transition(name, { audit }, continuations);
        return false;
      case 'question_pending':
        if (!patched(RUN_PATCHES.answersResumeSession)) {
          return (await transition(name, { session_id: callback.session_id, question: callback.question, audit })).applied;
        }
        return !(await awaitAnswer(callback, audit));
      case 'usage_limited':
        if (!patched(RUN_PATCHES.usageLimitWaits)) {
          return (await transition('gate_error', { last_error: `usage_limited: ${callback.reason}`, audit })).applied;
        }
        return !(await awaitLimitReset(callback, audit));
      case 'gate_timeout':
      case 'gate_error':
        return (await transition(name, { last_error: `${callback.event_type}: ${callback.reason}`, audit })).applied;
      case 'wake_ready':
      case 'session_finished_ready': {
        const woke = await transition(name, { run_state: callback.event_type, session_id: callback.session_id, audit });
        if (!woke.applied && woke.run_state !== callback.event_type) {
          // Already reconciled: an earlier attempt of this task recorded the rest, so the run is done.
          return woke.run_state === 'reconciled' && patched(RUN_PATCHES.finishedRunEndsWait);
        }
        enter('reconciling');
        const evidence = callback.evidence ?? null;
        await transition('reconciling', {
          decision: evidence?.decision ?? null,
          decision_summary: evidence?.decision_summary ?? null,
          evidence: evidence ? { ...evidence } : null,
          audit: { callback: callback.idempotency_key, sufficient_for_paper: evidence?.sufficient_for_paper ?? false },
        });
        await transition('completed');
        return true;
      }
    }
  }
}
