import { describe, expect, it } from 'vitest';
import { continuationVerdict, continuePrompt, missingEvidence } from '../../worker-gate/domain/evidence-gaps.ts';

/** When a session that ended is continued, and with what prompt (docs/worker-gate.md#continuing-a-premature-stop). */

const evidence = (files: { run_notes: boolean; decision_file: boolean; results_json_files: number }) => ({
  ...files,
  decision: null,
  decision_summary: null,
  sufficient_for_paper: false,
});

describe('a premature stop', () => {
  it('is a session without its run notes or its decision; results alone are not asked for again', () => {
    expect(missingEvidence(evidence({ run_notes: true, decision_file: true, results_json_files: 0 }))).toEqual([]);
    const missing = missingEvidence(evidence({ run_notes: false, decision_file: false, results_json_files: 3 }));
    expect(missing).toHaveLength(2);
    expect(missing[0]).toMatch(/^`run_notes\.md`/);
    expect(missing[1]).toMatch(/^`\.research\/decision\.json`/);
    expect(continuePrompt(missing)).toContain(`Missing:\n- ${missing[0]}\n- ${missing[1]}\n`);
  });

  it('is continued while the limit and the token budget allow', () => {
    const missing = ['`run_notes.md`'];
    expect(continuationVerdict({ missing, continuationsSoFar: 0, limit: 1, budgetLeft: null })).toEqual({ continue: true });
    expect(continuationVerdict({ missing, continuationsSoFar: 1, limit: 1, budgetLeft: null })).toEqual({ continue: false, reason: 'continued 1 time(s), agent_continue_limit 1' });
    expect(continuationVerdict({ missing, continuationsSoFar: 0, limit: 0, budgetLeft: null })).toMatchObject({ continue: false });
    expect(continuationVerdict({ missing, continuationsSoFar: 0, limit: 1, budgetLeft: 0 })).toEqual({ continue: false, reason: 'the run has spent its token budget' });
    expect(continuationVerdict({ missing: [], continuationsSoFar: 0, limit: 1, budgetLeft: 500 })).toEqual({ continue: false, reason: 'the run left its evidence' });
  });
});
