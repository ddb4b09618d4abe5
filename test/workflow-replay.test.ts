import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { replayHistory, storedHistories } from './support/histories.ts';
import { quietTemporalLogs } from './support/temporal.ts';

/**
 * Every stored run history replays against the current workflow code (README "Changing a workflow"). Fixtures are
 * added, never re-captured or removed, so the list below only grows: a fixture that disappears fails here.
 */

/**
 * Run histories: captured before any patch, then once more after each patch that changes what their path records
 * (named after it); a patch that only one path reaches (finished-run-ends-wait) adds that path's history alone. Paper
 * histories: one per path, and a draft-next; after paper-evidence-secrets, a step held for the service's secrets at the
 * evidence and at the writer's request, and the draft-next that stopped at it. Research-cycle histories: a cycle
 * stopped by a stop condition, one that ran every stage across a crash (before and after cycle-child-workflows), and one
 * that drafted a paper. A queue pump tick that dispatched (before and after pump-child-workflows), and a scheduled queue
 * check.
 */
const FIXTURES = [
  'alert-check',
  'cycle-completed',
  'cycle-completed.cycle-child-workflows',
  'cycle-paper-drafted.cycle-child-workflows',
  'cycle-stopped',
  'paper-draft-next-held.paper-evidence-secrets',
  'paper-draft-next',
  'paper-drafted',
  'paper-evidence-missing',
  'paper-held-for-review.paper-evidence-secrets',
  'paper-rewrite-batch',
  'paper-rewritten',
  'paper-writer-failed',
  'paper-writer-request-held.paper-evidence-secrets',
  'pump-dispatched',
  'pump-dispatched.pump-child-workflows',
  'run-canceled',
  'run-canceled.preflight-as-activity',
  'run-claim-lost',
  'run-claim-lost.preflight-as-activity',
  'run-completed',
  'run-completed.preflight-as-activity',
  'run-completion-timeout',
  'run-completion-timeout.preflight-as-activity',
  'run-dispatch-failed',
  'run-dispatch-failed.preflight-as-activity',
  'run-finished-before-callback.finished-run-ends-wait',
  'run-gate-timeout',
  'run-gate-timeout.preflight-as-activity',
  'run-preflight-failed',
  'run-preflight-failed.preflight-as-activity',
  'run-question-pending',
  'run-question-pending.preflight-as-activity',
];

const LEADING_TIMER_WORKFLOW = fileURLToPath(new URL('./fixtures/workflows/run-with-leading-timer.ts', import.meta.url));

describe('stored workflow histories', () => {
  const histories = storedHistories();

  it('are all there, one per path', () => {
    expect(histories.map((entry) => entry.name)).toEqual(FIXTURES);
  });

  it.each(histories.map((entry) => [entry.name, entry.history] as const))('%s replays without a non-determinism error', async (name, history) => {
    await expect(replayHistory(history, `replay:${name}`)).resolves.toBeUndefined();
  }, 60_000);

  it('fail to replay against a workflow with a non-deterministic edit', async () => {
    quietTemporalLogs();
    const { code } = await bundleWorkflowCode({ workflowsPath: LEADING_TIMER_WORKFLOW, logger: silentLogger });
    const completed = histories.find((entry) => entry.name === 'run-completed')!;
    await expect(Worker.runReplayHistory({ workflowBundle: { code } }, completed.history, 'replay:edited')).rejects.toThrow(/nondeterminism/i);
  }, 60_000);
});

const silentLogger = { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
