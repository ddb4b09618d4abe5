import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CandidateProposalSchema,
  GENERATION_MODES,
  RUNTIME_CLASSES,
  type CandidateProposal,
  type GenerationMode,
} from '../../capabilities/research/domain/research-candidate.ts';
import {
  DEFAULT_MIN_ADMISSION_SCORE,
  NEEDS_REVIEW_MIN_SCORE,
  PLANNER_VERSION,
  SHALLOW_INCREMENT_PATTERNS,
  hardFailures,
  isNearIdentical,
  planBatch,
  scoreCandidate,
  textFingerprint,
  type ExistingCandidateRef,
  type HardFailure,
  type KnownNegative,
  type PlannerContext,
} from '../../capabilities/research/domain/research-planner.ts';

/** A complete manual_import candidate without any hard failure; weighted 65.3, no bonus. */
const BASE: CandidateProposal = {
  title: 'Gradient-noise-scaled per-layer step sizes',
  generation_mode: 'manual_import',
  hypothesis:
    'Per-layer step sizes derived from the gradient noise scale let a 125M decoder reach baseline perplexity with 30% fewer tokens',
  mechanism:
    'Estimate the gradient noise scale per layer every 200 steps and set each layer step size proportional to its inverse square root',
  baseline_to_beat: 'AdamW with a cosine schedule at a tuned global step size',
  success_threshold: 'at least 25% fewer tokens to reach validation perplexity 20',
  kill_condition: 'fewer than 10% tokens saved, averaged over 3 seeds',
  expected_artifacts: ['loss curves', 'tokens-to-target table'],
  required_evidence: [],
  estimated_runtime_class: 'hours',
  likely_failure_modes: [],
  dedupe_key: 'gns-per-layer-step',
  source_ids: [],
  source_urls: [],
  similar_prior_projects: [],
  novelty: 8,
  feasibility: 7,
  accessibility: 6,
  falsifiability: 8,
};

const make = (over: Partial<CandidateProposal> = {}): CandidateProposal => ({ ...BASE, ...over });

/** novelty, feasibility, accessibility, falsifiability. */
const dims = (novelty: number, feasibility: number, accessibility?: number, falsifiability?: number) => ({
  novelty,
  feasibility,
  accessibility,
  falsifiability,
});

const EMPTY: PlannerContext = { existing: [], knownNegatives: [] };

const codes = (failures: readonly HardFailure[]) => failures.map((f) => f.code);

describe('constants', () => {
  it('names the planner version and the spec thresholds', () => {
    expect(PLANNER_VERSION).toBe('planner.v1');
    expect(DEFAULT_MIN_ADMISSION_SCORE).toBe(72);
    expect(NEEDS_REVIEW_MIN_SCORE).toBe(58);
  });

  it('BASE is a valid proposal with no hard failure', () => {
    expect(CandidateProposalSchema.parse(BASE)).toEqual(BASE);
    expect(hardFailures(BASE, [])).toEqual([]);
  });
});

describe('scoreCandidate: weights', () => {
  it.each<[string, ReturnType<typeof dims>, number]>([
    ['all zero', dims(0, 0, 0, 0), 0],
    ['novelty only: 2.6 per point', dims(10, 0, 0, 0), 26],
    ['feasibility only: 1.7 per point', dims(0, 10, 0, 0), 17],
    ['accessibility only: 2.5 per point', dims(0, 0, 10, 0), 25],
    ['falsifiability only: 2.2 per point', dims(0, 0, 0, 10), 22],
    ['all ten: 90', dims(10, 10, 10, 10), 90],
    ['BASE figures', dims(8, 7, 6, 8), 65.3],
    ['rounded to 0.1 (3.198 → 3.2)', dims(1.23, 0, 0, 0), 3.2],
    ['rounded to 0.1 (3.224 → 3.2)', dims(1.24, 0, 0, 0), 3.2],
    ['rounded to 0.1 (0.65 → 0.7)', dims(0.25, 0, 0, 0), 0.7],
  ])('%s', (_name, d, weighted) => {
    const b = scoreCandidate(make(d));
    expect(b.weighted).toBe(weighted);
    expect(b.mode_bonus).toBe(0);
    expect(b.score).toBe(weighted);
  });
});

describe('scoreCandidate: mode bonus on both sides of its condition', () => {
  it.each<[string, GenerationMode, Partial<CandidateProposal>, number]>([
    ['moonshot, falsifiability 7 (boundary)', 'moonshot', dims(5, 5, 5, 7), 4],
    ['moonshot, falsifiability 10', 'moonshot', dims(5, 5, 5, 10), 4],
    ['moonshot, falsifiability 6.9', 'moonshot', dims(5, 5, 5, 6.9), -8],
    ['moonshot, falsifiability from fallback 6', 'moonshot', dims(5, 5, 5, undefined), -8],
    ['home_hardware, accessibility 7 (boundary)', 'home_hardware_accessibility', dims(5, 5, 7, 5), 4],
    ['home_hardware, accessibility 6.9', 'home_hardware_accessibility', dims(5, 5, 6.9, 5), -5],
    [
      'home_hardware, accessibility from fallback 5',
      'home_hardware_accessibility',
      { ...dims(5, 5, undefined, 5), accessibility_delta: 'runs on one 8 GB consumer GPU' },
      -5,
    ],
    [
      'followup, with novelty_comparison',
      'followup_from_negative',
      { ...dims(5, 5, 5, 5), novelty_comparison: 'the prior run used a fixed step size; this one adapts it per layer' },
      3,
    ],
    ['followup, without novelty_comparison', 'followup_from_negative', dims(5, 5, 5, 5), -8],
    ['fresh_grounded', 'fresh_grounded', dims(5, 5, 5, 5), 2],
    ['implementation_gap', 'implementation_gap', dims(5, 5, 5, 5), 2],
    ['paper_replication_extension', 'paper_replication_extension', dims(5, 5, 5, 5), 1],
    ['manual_import', 'manual_import', dims(5, 5, 5, 5), 0],
  ])('%s', (_name, mode, over, bonus) => {
    const b = scoreCandidate(make({ generation_mode: mode, ...over }));
    expect(b.mode_bonus).toBe(bonus);
    expect(b.mode_bonus_reason).toContain(mode);
    expect(b.score).toBe(Math.round((b.weighted + bonus) * 10) / 10);
  });

  it('covers every generation mode', () => {
    const seen = new Set(GENERATION_MODES.map((m) => scoreCandidate(make({ generation_mode: m })).mode_bonus_reason));
    expect(seen.size).toBe(GENERATION_MODES.length);
  });
});

describe('scoreCandidate: fallbacks', () => {
  it.each<[string, Partial<CandidateProposal>, { value: number; fallback: boolean }]>([
    ['given accessibility is used', { accessibility: 3, accessibility_delta: 'x' }, { value: 3, fallback: false }],
    ['given 0 is not replaced', { accessibility: 0, accessibility_delta: 'x' }, { value: 0, fallback: false }],
    ['missing + accessibility_delta → 5', { accessibility: undefined, accessibility_delta: 'runs on a laptop' }, { value: 5, fallback: true }],
    ['missing, no accessibility_delta → 0', { accessibility: undefined, accessibility_delta: undefined }, { value: 0, fallback: true }],
    ['missing, blank accessibility_delta → 0', { accessibility: undefined, accessibility_delta: '   ' }, { value: 0, fallback: true }],
  ])('accessibility: %s', (_name, over, want) => {
    const b = scoreCandidate(make(over));
    expect(b.accessibility).toBe(want.value);
    expect(b.accessibility_fallback).toBe(want.fallback);
  });

  it.each<[string, Partial<CandidateProposal>, { value: number; fallback: boolean }]>([
    ['given falsifiability is used', { falsifiability: 4 }, { value: 4, fallback: false }],
    ['missing + threshold + kill → 6', { falsifiability: undefined }, { value: 6, fallback: true }],
    ['missing, no success_threshold → 0', { falsifiability: undefined, success_threshold: undefined }, { value: 0, fallback: true }],
    ['missing, no kill_condition → 0', { falsifiability: undefined, kill_condition: undefined }, { value: 0, fallback: true }],
    ['missing, neither → 0', { falsifiability: undefined, success_threshold: undefined, kill_condition: undefined }, { value: 0, fallback: true }],
  ])('falsifiability: %s', (_name, over, want) => {
    const b = scoreCandidate(make(over));
    expect(b.falsifiability).toBe(want.value);
    expect(b.falsifiability_fallback).toBe(want.fallback);
  });

  it('the fallback values enter the weighted sum', () => {
    // 2.6·8 + 1.7·7 + 2.5·5 + 2.2·6 = 20.8 + 11.9 + 12.5 + 13.2 = 58.4
    const b = scoreCandidate(make({ accessibility: undefined, falsifiability: undefined, accessibility_delta: 'laptop' }));
    expect(b.weighted).toBe(58.4);
  });
});

describe('scoreCandidate: clamp to [0, 100]', () => {
  it.each<[string, Partial<CandidateProposal>, number, number]>([
    ['moonshot with nothing: 0 − 8 → 0', { generation_mode: 'moonshot', ...dims(0, 0, 0, 0) }, 0, 0],
    ['followup with little: 2.6 − 8 → 0', { generation_mode: 'followup_from_negative', parent_run_id: 'run-1', ...dims(1, 0, 0, 0) }, 2.6, 0],
    ['home hardware: 4.9 − 5 → 0 (no −0)', { generation_mode: 'home_hardware_accessibility', ...dims(0, 0, 1.96, 0) }, 4.9, 0],
    ['the maximum is 90 + 4 = 94', { generation_mode: 'moonshot', ...dims(10, 10, 10, 10) }, 90, 94],
    ['home hardware maximum is 94 too', { generation_mode: 'home_hardware_accessibility', ...dims(10, 10, 10, 10) }, 90, 94],
    // The schema caps every dimension at 10; a caller that bypasses it gets its values clamped into 0–10, so the
    // score never passes 94 and the clamp at 100 is a guard no input reaches (the property test below checks ≤ 100).
    ['out-of-schema dimensions are clamped to 10', { generation_mode: 'moonshot', ...dims(20, 1e308, 11, 1e9) }, 90, 94],
    ['negative dimensions are clamped to 0', { generation_mode: 'moonshot', ...dims(-5, -1e308, -1, -3) }, 0, 0],
  ])('%s', (_name, over, weighted, score) => {
    const b = scoreCandidate(make(over));
    expect(b.weighted).toBe(weighted);
    expect(Object.is(b.score, score)).toBe(true);
  });

  it('treats a non-finite dimension as 0 (or as missing, for the two with a fallback)', () => {
    const b = scoreCandidate(make({ novelty: Number.NaN, feasibility: Infinity, accessibility: Number.NaN, falsifiability: -Infinity }));
    expect(b).toMatchObject({ novelty: 0, feasibility: 0, accessibility: 0, falsifiability: 6 });
    expect(b.accessibility_fallback).toBe(true);
    expect(b.score).toBe(13.2);
  });
});

describe('hardFailures: core contract', () => {
  it.each<[keyof CandidateProposal, unknown]>([
    ['hypothesis', undefined],
    ['hypothesis', '   '],
    ['mechanism', undefined],
    ['baseline_to_beat', undefined],
    ['success_threshold', undefined],
    ['kill_condition', undefined],
    ['estimated_runtime_class', undefined],
    ['expected_artifacts', []],
    ['expected_artifacts', ['  ']],
  ])("missing %s (%j) → one missing_contract_field naming it", (field, value) => {
    const failures = hardFailures(make({ [field]: value } as Partial<CandidateProposal>), []);
    expect(failures).toHaveLength(1);
    expect(failures[0]?.code).toBe('missing_contract_field');
    expect(failures[0]?.message).toContain(`'${field}'`);
  });

  it('one failure per missing field, in the contract order', () => {
    const failures = hardFailures(
      make({
        hypothesis: undefined,
        mechanism: undefined,
        baseline_to_beat: undefined,
        success_threshold: undefined,
        kill_condition: undefined,
        estimated_runtime_class: undefined,
        expected_artifacts: [],
      }),
      [],
    );
    expect(codes(failures)).toEqual(Array(7).fill('missing_contract_field'));
    expect(failures.map((f) => /'([a-z_]+)'/.exec(f.message)?.[1])).toEqual([
      'hypothesis',
      'mechanism',
      'baseline_to_beat',
      'success_threshold',
      'kill_condition',
      'estimated_runtime_class',
      'expected_artifacts',
    ]);
  });

  it.each(RUNTIME_CLASSES)('runtime class %s satisfies the contract', (runtime) => {
    expect(hardFailures(make({ estimated_runtime_class: runtime }), [])).toEqual([]);
  });
});

describe('hardFailures: grounding, lineage and novelty comparison', () => {
  it.each<[string, Partial<CandidateProposal>, string[]]>([
    ['fresh_grounded without sources (rule 1)', { generation_mode: 'fresh_grounded' }, ['missing_source_grounding']],
    ['fresh_grounded with a source id', { generation_mode: 'fresh_grounded', source_ids: ['src_1'] }, []],
    ['fresh_grounded with a source url', { generation_mode: 'fresh_grounded', source_urls: ['https://arxiv.org/abs/2401.00001'] }, []],
    ['fresh_grounded with only a blank source id', { generation_mode: 'fresh_grounded', source_ids: [' '] }, ['missing_source_grounding']],
    ['paper_replication_extension without sources', { generation_mode: 'paper_replication_extension' }, ['missing_source_grounding']],
    ['paper_replication_extension with a source', { generation_mode: 'paper_replication_extension', source_ids: ['paper_9'] }, []],
    ['followup_from_negative without parent (rule 2)', { generation_mode: 'followup_from_negative' }, ['missing_parent_lineage']],
    ['followup_from_negative with parent_project_id', { generation_mode: 'followup_from_negative', parent_project_id: 'proj_1' }, []],
    ['followup_from_negative with parent_run_id', { generation_mode: 'followup_from_negative', parent_run_id: 'run_1' }, []],
    ['moonshot needs no source', { generation_mode: 'moonshot' }, []],
    ['implementation_gap needs no source', { generation_mode: 'implementation_gap' }, []],
    ['home_hardware_accessibility needs no source', { generation_mode: 'home_hardware_accessibility' }, []],
    ['manual_import needs no source', { generation_mode: 'manual_import' }, []],
    ['similar_prior_projects without novelty_comparison', { similar_prior_projects: ['proj_7'] }, ['missing_novelty_comparison']],
    ['similar_prior_projects with novelty_comparison', { similar_prior_projects: ['proj_7'], novelty_comparison: 'proj_7 used one global scale' }, []],
    ['no similar projects, no comparison needed', { similar_prior_projects: [] }, []],
  ])('%s', (_name, over, want) => {
    const failures = hardFailures(make(over), []);
    expect(codes(failures)).toEqual(want);
    for (const f of failures) expect(f.message.length).toBeGreaterThan(20);
  });

  it('messages name the rule or the field', () => {
    const [grounding] = hardFailures(make({ generation_mode: 'fresh_grounded' }), []);
    expect(grounding?.message).toMatch(/source_ids.*source_urls.*rule 1/);
    const [lineage] = hardFailures(make({ generation_mode: 'followup_from_negative' }), []);
    expect(lineage?.message).toMatch(/parent_project_id.*parent_run_id.*rule 2/);
    const [novelty] = hardFailures(make({ similar_prior_projects: ['proj_7', 'proj_8'] }), []);
    expect(novelty?.message).toMatch(/similar_prior_projects.*proj_7, proj_8.*novelty_comparison/);
  });
});

/** At least one example per documented pattern; each must be a shallow increment on its own. */
const SHALLOW_EXAMPLES: readonly [string, string][] = [
  ['only tunes the learning rate', 'Tuning the learning rate will improve accuracy.'],
  ['only tunes the learning rate', 'Lower the learning rate to 1e-4 to improve accuracy on CIFAR-10.'],
  ['only tunes the learning rate', 'A higher LR.'],
  ['only tunes the learning rate', 'The learning rate is halved.'],
  ['only tunes hyperparameters', 'Run a hyperparameter sweep over the baseline.'],
  ['only tunes hyperparameters', 'Tune the hyper-parameters.'],
  ['only tunes hyperparameters', 'Grid search the dropout rate and weight decay.'],
  ['only changes the batch size', 'Increase the batch size to 512 for better throughput.'],
  ['only changes the batch size', 'Use larger batches.'],
  ['reruns with a different seed', 'Rerun the baseline with a different random seed.'],
  ['reruns with a different seed', 'Use a different seed.'],
  ['reruns the same experiment', 'Re-run the same experiment again.'],
  ['trains longer / more epochs', 'Train longer.'],
  ['trains longer / more epochs', 'Train the model for 50 more epochs to improve accuracy.'],
  ['trains longer / more epochs', 'A longer training schedule.'],
  ['adds more layers', 'Add more layers to the transformer.'],
  ['adds more layers', 'Make the network deeper.'],
  ['scales up the model', 'Scale up the model to 7B parameters.'],
  ['scales up the model', 'Use a bigger model.'],
  ['a minor tweak', 'A minor tweak to the baseline configuration.'],
  ['a minor tweak', 'Slightly change the baseline.'],
  ['renaming / reformatting only', 'Rename variables and reformat the training script.'],
  ['renaming / reformatting only', 'Refactor the code.'],
];

/** Real changes that merely mention a learning rate, a batch size, seeds, longer training or a layer. */
const LEGITIMATE: readonly string[] = [
  'Warmup can be dropped if the learning rate is increased only after the curvature estimate falls below a threshold',
  'Scaling each attention head learning rate by the inverse of its gradient-norm EMA stabilizes training at 4x the usual peak rate',
  'A learned per-parameter damping term replacing the Adam epsilon lets us use a 10x higher learning rate without divergence',
  'Tune the learning rate of the novel gated-attention adapter with a curvature-aware preconditioner',
  'Larger batch sizes hurt generalization because they suppress gradient noise; injecting calibrated Gaussian noise restores it',
  'Reporting the spread over five random seeds shows the claimed 1.2-point gain of method X is within seed variance',
  'Curriculum ordering by per-sample loss lets the model train longer without overfitting on small datasets',
  'Adding a cross-attention layer that routes retrieved passages into the decoder improves factual recall',
  'Training on longer sequences',
  BASE.hypothesis ?? '',
  BASE.mechanism ?? '',
];

describe('hardFailures: shallow increments', () => {
  it('every documented pattern has an example below', () => {
    expect(SHALLOW_INCREMENT_PATTERNS.length).toBeGreaterThanOrEqual(9);
    const labels = new Set(SHALLOW_EXAMPLES.map(([label]) => label));
    for (const p of SHALLOW_INCREMENT_PATTERNS) expect(labels).toContain(p.label);
    for (const p of SHALLOW_INCREMENT_PATTERNS) expect(p.pattern.global || p.pattern.sticky).toBe(false);
  });

  it.each(SHALLOW_EXAMPLES)('%s trips as hypothesis: %s', (label, text) => {
    const failures = hardFailures(make({ hypothesis: text }), []);
    expect(codes(failures)).toEqual(['shallow_increment']);
    expect(failures[0]?.message).toContain('the hypothesis');
    expect(failures[0]?.message).toContain(label);
  });

  it.each(SHALLOW_EXAMPLES)('%s trips as mechanism: %s', (label, text) => {
    const failures = hardFailures(make({ mechanism: text }), []);
    expect(codes(failures)).toEqual(['shallow_increment']);
    expect(failures[0]?.message).toContain('the mechanism');
    expect(failures[0]?.message).toContain(label);
  });

  it('names every tweak of a field that combines them', () => {
    const failures = hardFailures(make({ hypothesis: 'Lower the learning rate and train for 20 more epochs on CIFAR-10' }), []);
    expect(codes(failures)).toEqual(['shallow_increment']);
    expect(failures[0]?.message).toContain('only tunes the learning rate');
    expect(failures[0]?.message).toContain('trains longer / more epochs');
  });

  it('both fields shallow → two failures', () => {
    expect(codes(hardFailures(make({ hypothesis: 'Train longer.', mechanism: 'More epochs.' }), []))).toEqual([
      'shallow_increment',
      'shallow_increment',
    ]);
  });

  it.each(LEGITIMATE)('does not trip on a real change: %s', (text) => {
    expect(hardFailures(make({ hypothesis: text }), [])).toEqual([]);
    expect(hardFailures(make({ mechanism: text }), [])).toEqual([]);
  });
});

describe('hardFailures: re-running a known negative', () => {
  const NEG: KnownNegative = {
    dedupe_key: 'gns-per-layer-step',
    hypothesis: BASE.hypothesis ?? null,
    mechanism: BASE.mechanism ?? null,
    reference: 'proj_neg_1',
  };
  const NEW_MECHANISM = 'Replace the per-layer noise estimate with a Hutchinson trace estimate of the layer Hessian';

  it.each<[string, Partial<CandidateProposal>, KnownNegative, boolean]>([
    ['same key, same mechanism, no comparison', {}, NEG, true],
    ['same key, mechanism differs only in case and punctuation', { mechanism: `${BASE.mechanism?.toUpperCase()}!!` }, NEG, true],
    ['same key, new mechanism', { mechanism: NEW_MECHANISM }, NEG, false],
    ['same key, same mechanism, with novelty_comparison', { novelty_comparison: 'proj_neg_1 used 10x fewer tokens' }, NEG, false],
    ['other key, identical text', { dedupe_key: 'other-key' }, NEG, true],
    [
      'other key, near-identical text (one extra word), same mechanism',
      { dedupe_key: 'other-key', hypothesis: `${BASE.hypothesis} again` },
      NEG,
      true,
    ],
    ['other key, near-identical text, with novelty_comparison', { dedupe_key: 'other-key', novelty_comparison: 'x' }, NEG, false],
    ['other key, unrelated text', { dedupe_key: 'other-key', hypothesis: 'Sparse MoE routing halves memory', mechanism: NEW_MECHANISM }, NEG, false],
    ['same key, negative recorded no mechanism', { mechanism: NEW_MECHANISM }, { ...NEG, mechanism: null }, true],
    [
      'same key, negative recorded no mechanism, with novelty_comparison',
      { novelty_comparison: 'adds a Hessian estimate' },
      { ...NEG, mechanism: null },
      false,
    ],
  ])('%s → rerun: %s', (_name, over, neg, rerun) => {
    const failures = hardFailures(make(over), [neg]);
    expect(codes(failures)).toEqual(rerun ? ['known_negative_rerun'] : []);
    if (rerun) expect(failures[0]?.message).toContain('proj_neg_1');
  });

  it('one failure per matching negative, in the given order', () => {
    const failures = hardFailures(BASE, [NEG, { ...NEG, reference: 'run_neg_2' }, { ...NEG, dedupe_key: 'zzz', hypothesis: 'x', mechanism: 'y', reference: 'no' }]);
    expect(failures.map((f) => f.message.includes('proj_neg_1') || f.message.includes('run_neg_2'))).toEqual([true, true]);
  });
});

describe('textFingerprint and isNearIdentical', () => {
  it('normalizes case, punctuation and whitespace', () => {
    expect(textFingerprint({ hypothesis: '  Per-Layer   STEP sizes!! ', mechanism: "Noise-scale (GNS) isn't fixed." })).toBe(
      'per layer step sizes | noise scale gns isnt fixed',
    );
    expect(textFingerprint({ hypothesis: null })).toBe(' | ');
  });

  const H = 'per layer step sizes from the gradient noise scale cut tokens by a third';
  const M = 'estimate the noise scale every 200 steps and set the step size from it';
  it.each<[string, { hypothesis?: string | null; mechanism?: string | null }, { hypothesis?: string | null; mechanism?: string | null }, boolean]>([
    ['equal after normalization', { hypothesis: H, mechanism: M }, { hypothesis: H.toUpperCase(), mechanism: `${M}.` }, true],
    ['short texts only match exactly', { hypothesis: 'a b c' }, { hypothesis: 'A, B; C' }, true],
    ['short texts that differ', { hypothesis: 'a b c' }, { hypothesis: 'a b c d' }, false],
    ['word order ignored', { hypothesis: H, mechanism: M }, { hypothesis: M, mechanism: H }, true],
    ['one extra word in 20+ words', { hypothesis: H, mechanism: M }, { hypothesis: `${H} roughly`, mechanism: M }, true],
    ['a third of the words changed', { hypothesis: H, mechanism: M }, { hypothesis: 'sparse routing of experts halves memory', mechanism: M }, false],
    // {a..j} vs {a..i, k}: 9 shared of 11 → 0.82
    ['Jaccard 0.82 < 0.9', { hypothesis: 'a b c d e f g h i j' }, { hypothesis: 'a b c d e f g h i k' }, false],
    // {a..j} vs {a..j, k}: 10 of 11 → 0.909
    ['Jaccard 0.909 ≥ 0.9', { hypothesis: 'a b c d e f g h i j' }, { hypothesis: 'a b c d e f g h i j k' }, true],
    // 9 of 10 → exactly 0.9
    ['Jaccard exactly 0.9', { hypothesis: 'a b c d e f g h i' }, { hypothesis: 'a b c d e f g h i j' }, true],
    ['four words are too few for Jaccard', { hypothesis: 'a b c d' }, { hypothesis: 'a b c d e' }, false],
    ['both empty never match', { hypothesis: null, mechanism: null }, { hypothesis: '', mechanism: ' ' }, false],
  ])('%s → %s', (_name, a, b, want) => {
    expect(isNearIdentical(a, b)).toBe(want);
    expect(isNearIdentical(b, a)).toBe(want);
  });
});

describe('planBatch: decision thresholds', () => {
  // manual_import (no bonus). 2.6·10 + 1.7·10 + 2.2·10 = 65, + 2.5·a. With falsifiability 0: 43 + 2.5·a.
  it.each<[string, ReturnType<typeof dims>, number | undefined, number, string]>([
    ['exactly 72 → admitted', dims(10, 10, 2.8, 10), undefined, 72, 'admitted'],
    ['71.9 → needs-review', dims(10, 10, 2.76, 10), undefined, 71.9, 'needs-review'],
    ['exactly 58 → needs-review', dims(10, 10, 6, 0), undefined, 58, 'needs-review'],
    ['57.9 → rejected', dims(10, 10, 5.96, 0), undefined, 57.9, 'rejected'],
    ['custom 80: 80 → admitted', dims(10, 10, 6, 10), 80, 80, 'admitted'],
    ['custom 80: 79.9 → needs-review', dims(10, 10, 5.96, 10), 80, 79.9, 'needs-review'],
    ['custom 80: 72 → needs-review', dims(10, 10, 2.8, 10), 80, 72, 'needs-review'],
    ['custom 60: 60 → admitted', dims(10, 10, 6.8, 0), 60, 60, 'admitted'],
    ['custom 50: 55 → admitted', dims(10, 10, 4.8, 0), 50, 55, 'admitted'],
    ['custom 50: 49.9 → rejected', dims(10, 10, 2.76, 0), 50, 49.9, 'rejected'],
    ['custom 0: 0 → admitted', dims(0, 0, 0, 0), 0, 0, 'admitted'],
  ])('%s', (_name, d, min, score, decision) => {
    const ctx: PlannerContext = min === undefined ? EMPTY : { ...EMPTY, minAdmissionScore: min };
    const [planned] = planBatch([make(d)], ctx);
    expect(planned?.score).toBe(score);
    expect(planned?.decision).toBe(decision);
    expect(planned?.merged_into).toBeNull();
    expect(planned?.hard_failures).toEqual([]);
    expect(planned?.reasons.at(-1)).toMatch(new RegExp(`^score ${score.toFixed(1)} .*: ${decision}$`));
  });

  it('reason wording', () => {
    const [admitted] = planBatch([make(dims(10, 10, 2.8, 10))], EMPTY);
    expect(admitted?.reasons).toEqual([
      'score 72.0 = weighted 72.0 + mode bonus 0 (manual_import (no bonus))',
      'score 72.0 ≥ 72: admitted',
    ]);
    const [review] = planBatch([make(dims(10, 10, 6, 0))], EMPTY);
    expect(review?.reasons.at(-1)).toBe('score 58.0 < 72 and ≥ 58: needs-review');
    const [rejected] = planBatch([make(dims(10, 10, 5.96, 0))], EMPTY);
    expect(rejected?.reasons.at(-1)).toBe('score 57.9 < 58: rejected');
  });

  it.each([Number.NaN, -1, 100.5, Infinity])('refuses minAdmissionScore %s', (min) => {
    expect(() => planBatch([BASE], { ...EMPTY, minAdmissionScore: min })).toThrow(RangeError);
  });
});

describe('planBatch: hard failures, duplicates and merges', () => {
  const HIGH = dims(10, 10, 10, 10); // 90 → admitted when nothing else applies

  it('a hard failure rejects even a top score, with every failure message as a reason', () => {
    const [planned] = planBatch([make({ ...HIGH, hypothesis: 'Train longer.', kill_condition: undefined })], EMPTY);
    expect(planned?.decision).toBe('rejected');
    expect(planned?.score).toBe(90);
    expect(codes(planned?.hard_failures ?? [])).toEqual(['missing_contract_field', 'shallow_increment']);
    expect(planned?.reasons).toEqual([
      ...(planned?.hard_failures ?? []).map((f) => f.message),
      'rejected: 2 hard failures (score 90.0 not considered)',
    ]);
  });

  it('in-batch duplicates: the first is judged normally, later ones are rejected (rule 4)', () => {
    const out = planBatch(
      [make({ ...HIGH, dedupe_key: 'key-a' }), make({ ...HIGH, dedupe_key: 'key-b' }), make({ ...HIGH, dedupe_key: 'key-a', title: 'again' }), make({ ...HIGH, dedupe_key: 'key-a' })],
      EMPTY,
    );
    expect(out.map((p) => p.decision)).toEqual(['admitted', 'admitted', 'rejected', 'rejected']);
    expect(out[2]?.reasons).toEqual(["duplicate dedupe_key 'key-a' earlier in this batch (candidate 0): rejected (rule 4)"]);
    expect(out[3]?.reasons[0]).toContain('(candidate 0)');
    expect(out[2]?.hard_failures).toEqual([]);
  });

  it('a duplicate is rejected even when the first occurrence was itself rejected or merged', () => {
    const failing = planBatch([make({ ...HIGH, mechanism: undefined }), make(HIGH)], EMPTY);
    expect(failing.map((p) => p.decision)).toEqual(['rejected', 'rejected']);
    expect(failing[1]?.reasons[0]).toMatch(/^duplicate dedupe_key/);

    const existing: ExistingCandidateRef[] = [{ candidate_id: 'cand_1', dedupe_key: BASE.dedupe_key, hypothesis: null, mechanism: null }];
    const merged = planBatch([make(HIGH), make(HIGH)], { ...EMPTY, existing });
    expect(merged.map((p) => [p.decision, p.merged_into])).toEqual([
      ['merged', 'cand_1'],
      ['rejected', null],
    ]);
  });

  it('a hard failure wins over an in-batch duplicate', () => {
    const out = planBatch([make(HIGH), make({ ...HIGH, mechanism: undefined })], EMPTY);
    expect(codes(out[1]?.hard_failures ?? [])).toEqual(['missing_contract_field']);
    expect(out[1]?.reasons.some((r) => r.startsWith('duplicate'))).toBe(false);
  });

  const OTHER: ExistingCandidateRef = {
    candidate_id: 'cand_other',
    dedupe_key: 'moe-routing',
    hypothesis: 'Sparse mixture-of-experts routing halves activation memory at equal quality',
    mechanism: 'Route each token to two of sixteen experts with a load-balancing loss',
  };

  it.each<[string, Partial<CandidateProposal>, ExistingCandidateRef[], string | null, RegExp | null]>([
    [
      'same dedupe_key',
      {},
      [{ candidate_id: 'cand_key', dedupe_key: BASE.dedupe_key, hypothesis: 'different', mechanism: 'different' }],
      'cand_key',
      /^merged into cand_key: same dedupe_key 'gns-per-layer-step'$/,
    ],
    [
      'near-identical text under another key',
      { dedupe_key: 'new-key' },
      [{ candidate_id: 'cand_text', dedupe_key: 'old-key', hypothesis: `${BASE.hypothesis}.`, mechanism: BASE.mechanism?.toUpperCase() ?? null }],
      'cand_text',
      /^merged into cand_text: near-identical hypothesis and mechanism$/,
    ],
    ['different key and different text', { dedupe_key: 'new-key' }, [OTHER], null, null],
    [
      'dedupe_key match wins over a text match',
      {},
      [
        { candidate_id: 'cand_a_text', dedupe_key: 'old-key', hypothesis: BASE.hypothesis ?? null, mechanism: BASE.mechanism ?? null },
        { candidate_id: 'cand_z_key', dedupe_key: BASE.dedupe_key, hypothesis: null, mechanism: null },
      ],
      'cand_z_key',
      /same dedupe_key/,
    ],
    [
      'several key matches → the smallest candidate_id, whatever the order',
      {},
      [
        { candidate_id: 'cand_9', dedupe_key: BASE.dedupe_key, hypothesis: null, mechanism: null },
        { candidate_id: 'cand_10', dedupe_key: BASE.dedupe_key, hypothesis: null, mechanism: null },
        { candidate_id: 'cand_2', dedupe_key: BASE.dedupe_key, hypothesis: null, mechanism: null },
      ],
      'cand_10',
      /cand_10/,
    ],
  ])('%s', (_name, over, existing, mergedInto, reason) => {
    const [planned] = planBatch([make({ ...HIGH, ...over })], { ...EMPTY, existing });
    expect(planned?.merged_into).toBe(mergedInto);
    expect(planned?.decision).toBe(mergedInto ? 'merged' : 'admitted');
    if (reason) expect(planned?.reasons).toEqual([expect.stringMatching(reason)]);
  });

  it('merges even a low-scoring candidate (merge comes before the score)', () => {
    const existing = [{ candidate_id: 'cand_1', dedupe_key: BASE.dedupe_key, hypothesis: null, mechanism: null }];
    const [planned] = planBatch([make(dims(0, 0, 0, 0))], { ...EMPTY, existing });
    expect(planned?.decision).toBe('merged');
  });

  it('a hard failure wins over a merge', () => {
    const existing = [{ candidate_id: 'cand_1', dedupe_key: BASE.dedupe_key, hypothesis: null, mechanism: null }];
    const [planned] = planBatch([make({ ...HIGH, similar_prior_projects: ['p1'] })], { ...EMPTY, existing });
    expect(planned?.decision).toBe('rejected');
    expect(planned?.merged_into).toBeNull();
  });

  it('a known-negative rerun is rejected; with a new mechanism it is judged on its score', () => {
    const negative: KnownNegative = { dedupe_key: BASE.dedupe_key, hypothesis: null, mechanism: BASE.mechanism ?? null, reference: 'run_42' };
    const [rerun] = planBatch([make(HIGH)], { ...EMPTY, knownNegatives: [negative] });
    expect(rerun?.decision).toBe('rejected');
    expect(rerun?.reasons[0]).toMatch(/^re-runs known negative run_42 \(same dedupe_key 'gns-per-layer-step'\)/);
    const [fresh] = planBatch([make({ ...HIGH, mechanism: 'Use a Hutchinson trace estimate of the layer Hessian instead' })], {
      ...EMPTY,
      knownNegatives: [negative],
    });
    expect(fresh?.decision).toBe('admitted');
  });

  it('carries index, proposal, breakdown and fingerprint', () => {
    const out = planBatch([make(HIGH), make({ dedupe_key: 'second' })], EMPTY);
    expect(out.map((p) => p.index)).toEqual([0, 1]);
    expect(out[1]?.proposal.dedupe_key).toBe('second');
    expect(out[0]?.breakdown).toEqual(scoreCandidate(make(HIGH)));
    expect(out[0]?.score).toBe(out[0]?.breakdown.score);
    expect(out[0]?.text_fingerprint).toBe(textFingerprint(BASE));
    expect(planBatch([], EMPTY)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Properties

const SAMPLE_TEXT = [
  ...SHALLOW_EXAMPLES.map(([, text]) => text),
  ...LEGITIMATE.filter((t) => t.length > 0),
];
const textArb = fc.oneof(
  fc.constantFrom(...SAMPLE_TEXT),
  fc.string({ minLength: 1, maxLength: 60 }).filter((s) => s.trim().length > 0),
);
const optText = fc.option(textArb, { nil: undefined });
const KEYS = ['alpha-key', 'beta-key', 'gamma-key', BASE.dedupe_key];
const keyArb = fc.oneof(fc.constantFrom(...KEYS), fc.stringMatching(/^[a-z0-9][a-z0-9._:/-]{2,30}$/));
const idArb = fc.constantFrom('a1', 'b2', 'c3');
const dimArb = fc.oneof(fc.integer({ min: 0, max: 10 }), fc.double({ min: 0, max: 10, noNaN: true }));

/** A raw proposal, parsed through the schema, so it is a genuine CandidateProposal. */
const proposalArb: fc.Arbitrary<CandidateProposal> = fc
  .record(
    {
      title: textArb,
      generation_mode: fc.constantFrom(...GENERATION_MODES),
      hypothesis: optText,
      mechanism: optText,
      baseline_to_beat: optText,
      success_threshold: optText,
      kill_condition: optText,
      expected_artifacts: fc.array(textArb, { maxLength: 2 }),
      estimated_runtime_class: fc.option(fc.constantFrom(...RUNTIME_CLASSES), { nil: undefined }),
      novelty_comparison: optText,
      dedupe_key: keyArb,
      source_ids: fc.array(idArb, { maxLength: 2 }),
      source_urls: fc.array(fc.constantFrom('https://arxiv.org/abs/2401.00001', 'http://example.org/x'), { maxLength: 1 }),
      parent_project_id: fc.option(idArb, { nil: undefined }),
      parent_run_id: fc.option(idArb, { nil: undefined }),
      similar_prior_projects: fc.array(idArb, { maxLength: 2 }),
      accessibility_delta: optText,
      novelty: dimArb,
      feasibility: dimArb,
      accessibility: fc.option(dimArb, { nil: undefined }),
      falsifiability: fc.option(dimArb, { nil: undefined }),
    },
    { requiredKeys: ['title', 'dedupe_key', 'novelty', 'feasibility'] },
  )
  .map((raw) => CandidateProposalSchema.parse(raw));

/** Mostly complete, high-scoring proposals, so that admissions (and failures among them) are common. */
const strongProposalArb: fc.Arbitrary<CandidateProposal> = fc
  .record({
    over: fc.record(
      {
        hypothesis: optText,
        mechanism: textArb,
        kill_condition: optText,
        generation_mode: fc.constantFrom(...GENERATION_MODES),
        similar_prior_projects: fc.array(idArb, { maxLength: 1 }),
        dedupe_key: keyArb,
      },
      { requiredKeys: ['dedupe_key'] },
    ),
    d: fc.tuple(fc.integer({ min: 7, max: 10 }), fc.integer({ min: 7, max: 10 }), fc.integer({ min: 7, max: 10 }), fc.integer({ min: 7, max: 10 })),
  })
  .map(({ over, d }) => CandidateProposalSchema.parse(make({ ...over, ...dims(...d) })));

const anyProposalArb = fc.oneof(proposalArb, strongProposalArb);

const refArb: fc.Arbitrary<ExistingCandidateRef> = fc.record({
  candidate_id: fc.constantFrom('cand_1', 'cand_2', 'cand_3', 'cand_4'),
  dedupe_key: keyArb,
  hypothesis: fc.option(textArb, { nil: null }),
  mechanism: fc.option(textArb, { nil: null }),
});
const negativeArb: fc.Arbitrary<KnownNegative> = fc.record({
  dedupe_key: keyArb,
  hypothesis: fc.option(textArb, { nil: null }),
  mechanism: fc.option(textArb, { nil: null }),
  reference: fc.constantFrom('proj_1', 'run_2'),
});
const contextArb: fc.Arbitrary<PlannerContext> = fc.record(
  {
    existing: fc.array(refArb, { maxLength: 4 }),
    knownNegatives: fc.array(negativeArb, { maxLength: 3 }),
    minAdmissionScore: fc.integer({ min: 0, max: 100 }),
  },
  { requiredKeys: ['existing', 'knownNegatives'] },
);
const batchArb = fc.array(anyProposalArb, { maxLength: 8 });

/** Same data, every object's keys inserted in reverse order. */
function reverseKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v: unknown) => reverseKeys(v)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reverseKeys(v)])) as T;
  }
  return value;
}

describe('properties', () => {
  it('score is always within [0, 100] and a multiple of 0.1, for schema-valid proposals', () => {
    fc.assert(
      fc.property(anyProposalArb, (p) => {
        const b = scoreCandidate(p);
        expect(b.score).toBeGreaterThanOrEqual(0);
        expect(b.score).toBeLessThanOrEqual(100);
        expect(Math.round(b.score * 10) / 10).toBe(b.score);
      }),
    );
  });

  it('score stays within [0, 100] even for out-of-schema dimensions (any double, NaN, ±Infinity)', () => {
    fc.assert(
      fc.property(proposalArb, fc.array(fc.option(fc.double(), { nil: undefined }), { minLength: 4, maxLength: 4 }), (p, [n, f, a, x]) => {
        const b = scoreCandidate({ ...p, novelty: n ?? 0, feasibility: f ?? 0, accessibility: a, falsifiability: x });
        expect(Number.isFinite(b.score)).toBe(true);
        expect(b.score).toBeGreaterThanOrEqual(0);
        expect(b.score).toBeLessThanOrEqual(100);
        expect(b.score).toBeLessThanOrEqual(94); // dimensions are clamped into 0–10 first
      }),
    );
  });

  it('a candidate with a hard failure is never admitted; an admitted one has none and meets the bar', () => {
    let failedHigh = 0;
    fc.assert(
      fc.property(batchArb, contextArb, (batch, ctx) => {
        const min = ctx.minAdmissionScore ?? DEFAULT_MIN_ADMISSION_SCORE;
        for (const planned of planBatch(batch, ctx)) {
          expect(planned.hard_failures).toEqual(hardFailures(planned.proposal, ctx.knownNegatives));
          if (planned.hard_failures.length > 0) {
            expect(planned.decision).toBe('rejected');
            if (planned.score >= min) failedHigh += 1;
          }
          if (planned.decision === 'admitted') {
            expect(planned.hard_failures).toEqual([]);
            expect(planned.score).toBeGreaterThanOrEqual(min);
          }
          if (planned.decision === 'merged') expect(planned.merged_into).not.toBeNull();
          else expect(planned.merged_into).toBeNull();
          expect(planned.reasons.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 200 },
    );
    // The property is not vacuous: high scorers with a hard failure did occur.
    expect(failedHigh).toBeGreaterThan(0);
  });

  it('planBatch is deterministic and independent of key order and of the order of existing candidates', () => {
    fc.assert(
      fc.property(batchArb, contextArb, (batch, ctx) => {
        const first = planBatch(batch, ctx);
        expect(planBatch(batch, ctx)).toEqual(first);
        expect(planBatch(structuredClone(batch), structuredClone(ctx))).toEqual(first);
        const reordered = reverseKeys({ ...ctx, existing: [...ctx.existing].reverse() });
        expect(planBatch(reverseKeys(batch), reordered)).toEqual(first);
      }),
    );
  });

  it('output length equals input length, indexes in order, one decision each', () => {
    fc.assert(
      fc.property(batchArb, contextArb, (batch, ctx) => {
        const out = planBatch(batch, ctx);
        expect(out).toHaveLength(batch.length);
        expect(out.map((p) => p.index)).toEqual(batch.map((_, i) => i));
        out.forEach((p, i) => expect(p.proposal).toBe(batch[i]));
      }),
    );
  });

  it('in a batch, only the first occurrence of a dedupe_key can be anything but rejected', () => {
    fc.assert(
      fc.property(batchArb, contextArb, (batch, ctx) => {
        const seen = new Set<string>();
        for (const p of planBatch(batch, ctx)) {
          if (seen.has(p.proposal.dedupe_key)) expect(p.decision).toBe('rejected');
          seen.add(p.proposal.dedupe_key);
        }
      }),
    );
  });
});
