import type { DraftEvidence } from '../../capabilities/papers/domain/paper-draft.ts';

/** A small, complete evidence set for the writers and the checklist: notes, a decision, two results files. */
export const draftEvidence = (overrides: Partial<DraftEvidence> = {}): DraftEvidence => ({
  project_id: 'sparse-attention',
  project_name: 'Sparse attention on a home GPU',
  run_id: 'sparse-attention-20261122T100000Z',
  finished_at: '2026-11-22T10:20:00Z',
  decision: 'finalize_positive',
  decision_summary: 'Sparse attention kept accuracy at 0.912 while halving memory.',
  run_notes: '# Notes\nTried block sizes 32 and 64.\n\nBlock 64 won.',
  results: [
    { path: 'results/main/metrics.json', data: { accuracy: 0.912, memory_mib: 3120, runs: [{ loss: 0.31 }, { loss: 0.29 }] } },
    { path: 'results/baseline.json', data: { accuracy: 0.915, memory_mib: 6240, note: 'dense' } },
  ],
  ...overrides,
});
