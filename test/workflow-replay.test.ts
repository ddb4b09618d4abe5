import { describe, expect, it } from 'vitest';
import { replayHistory, storedHistories } from './support/histories.ts';

describe('stored run workflow histories', () => {
  const histories = storedHistories();

  it('exist, so a workflow change is checked against runs recorded by earlier code', () => {
    expect(histories.map((entry) => entry.name)).toContain('run-completed');
  });

  it.each(histories.map((entry) => [entry.name, entry.history] as const))('%s replays without a non-determinism error', async (name, history) => {
    await expect(replayHistory(history, `replay:${name}`)).resolves.toBeUndefined();
  }, 60_000);
});
