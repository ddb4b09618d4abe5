import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CodexRolloutUsage } from '../../worker-gate/launchers/codex-rollout.ts';

/**
 * The launcher's reading of Codex's rollout file (worker-gate/launchers/codex-rollout.ts), on real files: a resumed
 * session's earlier tokens are subtracted, and lines an agent that can write the tool's home appends afterwards cannot
 * make its spending look smaller.
 */

const SESSION = '01a2223b-1337-7aa3-b097-3b4d0ad730ce';
const STARTED_AT = '2026-11-28T12:00:00.000Z';

const tokenCount = (at: string, input: number, output: number) =>
  `${JSON.stringify({ timestamp: at, type: 'event_msg', payload: { type: 'token_count', info: { total_token_usage: { input_tokens: input, output_tokens: output } } } })}\n`;

/** The line Codex writes within milliseconds of each model answer, with the session's total so far. */
const usageRecord = (at: string, input: number, output: number) =>
  `${JSON.stringify({ timestamp: at, type: 'token_usage_record', payload: { response_id: 'resp_1', usage: { input_tokens: input, output_tokens: output }, thread_token_usage: { input_tokens: input, output_tokens: output } } })}\n`;

let home: string;
let rollout: string;

function freshHome(): CodexRolloutUsage {
  home = mkdtempSync(join(tmpdir(), 'rcp-rollout-'));
  const day = join(home, 'sessions', '2026', '11', '28');
  mkdirSync(day, { recursive: true });
  rollout = join(day, `rollout-2026-11-28T11-00-00-${SESSION}.jsonl`);
  return new CodexRolloutUsage(home, STARTED_AT);
}

afterEach(() => rmSync(home, { recursive: true, force: true }));

describe("Codex's rollout usage", () => {
  it('subtracts what the resumed session spent before this invocation started', () => {
    const usage = freshHome();
    writeFileSync(rollout, tokenCount('2026-11-28T11:00:00.000Z', 1_000, 100));
    expect(usage.poll(SESSION)).toBeNull();
    appendFileSync(rollout, tokenCount('2026-11-28T12:00:05.000Z', 1_500, 150));
    expect(usage.poll(SESSION)).toEqual({ input_tokens: 500, output_tokens: 50, total_tokens: 550 });
    usage.close();
  });

  it('ignores a "before" total that appears after the file was first read', () => {
    const usage = freshHome();
    writeFileSync(rollout, tokenCount('2026-11-28T11:00:00.000Z', 1_000, 100));
    expect(usage.poll(SESSION)).toBeNull();
    appendFileSync(rollout, tokenCount('2026-11-28T12:00:05.000Z', 41_000, 300));
    // Dated before the start, appended afterwards: it would cover 40,000 of the tokens just spent.
    appendFileSync(rollout, tokenCount('2000-01-01T00:00:00.000Z', 41_000, 300));
    expect(usage.poll(SESSION)).toEqual({ input_tokens: 40_000, output_tokens: 200, total_tokens: 40_200 });
    usage.close();
  });

  it("reads an answer's usage record, which comes before the token_count event (that waits for the answer's tool call)", () => {
    const usage = freshHome();
    writeFileSync(rollout, usageRecord('2026-11-28T11:00:00.000Z', 1_000, 100));
    expect(usage.poll(SESSION)).toBeNull();
    appendFileSync(rollout, usageRecord('2026-11-28T12:00:05.000Z', 51_500, 110));
    expect(usage.poll(SESSION)).toEqual({ input_tokens: 50_500, output_tokens: 10, total_tokens: 50_510 });
    appendFileSync(rollout, tokenCount('2026-11-28T12:00:20.000Z', 51_500, 110));
    expect(usage.poll(SESSION)).toEqual({ input_tokens: 50_500, output_tokens: 10, total_tokens: 50_510 });
    usage.close();
  });

  it('never lowers the running total when a smaller one is appended', () => {
    const usage = freshHome();
    writeFileSync(rollout, tokenCount('2026-11-28T12:00:05.000Z', 12_000, 400));
    expect(usage.poll(SESSION)).toEqual({ input_tokens: 12_000, output_tokens: 400, total_tokens: 12_400 });
    appendFileSync(rollout, tokenCount('2026-11-28T12:00:06.000Z', 10, 1));
    expect(usage.poll(SESSION)).toEqual({ input_tokens: 12_000, output_tokens: 400, total_tokens: 12_400 });
    usage.close();
  });
});
