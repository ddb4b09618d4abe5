import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import * as PATCHES from '../../workflows/patches.ts';
import { FIXTURE_PATCHES } from '../fixtures/history-patches.ts';
import { patchMarkers, replayHistory, storedHistories } from '../support/histories.ts';
import { quietTemporalLogs } from '../support/temporal.ts';

/**
 * Every stored history replays against the current workflow code (docs/architecture.md#changing-a-workflow). Fixtures are added,
 * never re-captured; one leaves only with the old branch of a patch it lists in test/fixtures/history-patches.ts, so a
 * fixture that disappears while its entry stays fails here.
 *
 * Run histories: captured before any patch, then once more after each patch that changes what their path records
 * (named after it); a patch that only one path reaches (finished-run-ends-wait) adds that path's history alone. Paper
 * histories: one per path, and a draft-next; after paper-evidence-secrets, a step held for the service's secrets at the
 * evidence and at the writer's request, and the draft-next that stopped at it. Research-cycle histories: a cycle
 * stopped by a stop condition, one that ran every stage across a crash (before and after cycle-child-workflows), and one
 * that drafted a paper. A queue pump tick that dispatched (before and after pump-child-workflows), and a scheduled queue
 * check.
 */

const LEADING_TIMER_WORKFLOW = fileURLToPath(new URL('../fixtures/workflows/run-with-leading-timer.ts', import.meta.url));

describe('stored workflow histories', () => {
  const histories = storedHistories();

  it('each name the patches whose old branch they replay, in test/fixtures/history-patches.ts', () => {
    expect(Object.keys(FIXTURE_PATCHES).sort(), 'every fixture listed, and no entry without its file').toEqual(histories.map((entry) => entry.name).sort());
    const patchIds = new Set(Object.values(PATCHES).flatMap((exported) => (typeof exported === 'object' ? Object.values<string>(exported) : [])));
    const unknown = Object.entries(FIXTURE_PATCHES).flatMap(([name, ids]) => ids.filter((id) => !patchIds.has(id)).map((id) => `${name}: ${id}`));
    expect(unknown, 'patch ids that workflows/patches.ts does not have').toEqual([]);
    for (const { name, history } of histories) {
      const markers = patchMarkers(history);
      // Recorded after a patch: it carries the marker and replays the new branch.
      expect(FIXTURE_PATCHES[name]!.filter((id) => markers.includes(id)), `${name} lists a patch whose marker it holds`).toEqual([]);
    }
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
