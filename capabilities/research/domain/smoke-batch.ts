import type { CandidateProposal, GenerationMode, SourceKind } from './research-candidate.ts';

/**
 * The smoke batch: a deterministic generator that turns stored sources into up to three well-formed candidates
 * without any provider, so an operator can exercise the whole intake lane (plan, admit, promote) on a fresh install.
 * The same sources always give the same candidates, with dedupe keys derived from the source, so running it again
 * merges instead of duplicating.
 */

export interface SmokeSource {
  source_id: string;
  kind: SourceKind;
  title: string;
  url: string | null;
  summary: string | null;
}

export const SMOKE_BATCH_MAX = 3;

/** Sources a fresh install starts from when none are stored yet: well-known, openly available papers. */
export const STARTER_SOURCES: readonly SmokeSource[] = [
  {
    source_id: 'starter-lora',
    kind: 'paper',
    title: 'LoRA: Low-Rank Adaptation of Large Language Models',
    url: 'https://arxiv.org/abs/2106.09685',
    summary: 'Freezes pretrained weights and trains low-rank update matrices, cutting trainable parameters by orders of magnitude.',
  },
  {
    source_id: 'starter-qlora',
    kind: 'paper',
    title: 'QLoRA: Efficient Finetuning of Quantized LLMs',
    url: 'https://arxiv.org/abs/2305.14314',
    summary: 'Finetunes 4-bit quantized models through LoRA adapters, fitting large-model finetuning on a single GPU.',
  },
  {
    source_id: 'starter-chinchilla',
    kind: 'paper',
    title: 'Training Compute-Optimal Large Language Models',
    url: 'https://arxiv.org/abs/2203.15556',
    summary: 'Model size and training tokens should be scaled in equal proportion for a fixed compute budget.',
  },
];

interface Template {
  mode: GenerationMode;
  scores: Pick<CandidateProposal, 'novelty' | 'feasibility' | 'accessibility' | 'falsifiability'>;
  build(source: SmokeSource): Omit<CandidateProposal, 'generation_mode' | 'novelty' | 'feasibility' | 'accessibility' | 'falsifiability' | 'dedupe_key' | 'source_ids' | 'source_urls'>;
}

const TEMPLATES: readonly Template[] = [
  {
    mode: 'home_hardware_accessibility',
    scores: { novelty: 7, feasibility: 8, accessibility: 8, falsifiability: 8 },
    build: (source) => ({
      title: `Consumer-GPU check of "${source.title}"`,
      hypothesis: `The central result of "${source.title}" holds on a single 24 GB consumer GPU within one day of compute.`,
      mechanism: `Reproduce the method's core comparison at the largest scale that fits 24 GB, using gradient checkpointing and 8-bit optimizer states so memory, not the method, sets the limit.`,
      baseline_to_beat: 'The unmodified baseline configuration reported by the source, run on the same hardware and data.',
      success_threshold: 'The method matches the source-reported relative gain over the baseline within 20 % on the chosen benchmark.',
      kill_condition: 'The relative gain is below half the reported one after three seeds, or the run does not fit in 24 GB.',
      expected_artifacts: ['run_notes.md', 'results/metrics.json', 'memory and wall-clock profile'],
      required_evidence: ['per-seed benchmark scores', 'peak VRAM per configuration'],
      estimated_runtime_class: 'overnight',
      expected_token_budget: 200_000,
      workload_class: 'training',
      likely_failure_modes: ['out-of-memory at the intended scale', 'benchmark variance larger than the effect'],
      similar_prior_projects: [],
      accessibility_delta: 'Moves the result from datacenter hardware to a single consumer GPU.',
    }),
  },
  {
    mode: 'fresh_grounded',
    scores: { novelty: 7, feasibility: 8, accessibility: 7, falsifiability: 8 },
    build: (source) => ({
      title: `Limits of "${source.title}" on small models`,
      hypothesis: `The benefit reported in "${source.title}" shrinks sharply below 1B parameters.`,
      mechanism: `Sweep model sizes from 70M to 1B on a fixed data budget and fit the gain against parameter count, isolating where the method stops paying off.`,
      baseline_to_beat: 'Standard training of each model size with the same data and compute.',
      success_threshold: 'A monotone trend in the gain across at least four model sizes with non-overlapping 95 % intervals at the ends.',
      kill_condition: 'No size dependence: the gain is flat within noise across the sweep.',
      expected_artifacts: ['run_notes.md', 'results/sweep.json', 'gain-versus-size plot'],
      required_evidence: ['per-size scores over three seeds'],
      estimated_runtime_class: 'days',
      expected_token_budget: 300_000,
      workload_class: 'training',
      likely_failure_modes: ['small models too noisy to separate', 'data budget too small for the largest size'],
      similar_prior_projects: [],
    }),
  },
  {
    mode: 'paper_replication_extension',
    scores: { novelty: 6, feasibility: 8, accessibility: 8, falsifiability: 8 },
    build: (source) => ({
      title: `Bounded replication and extension of "${source.title}"`,
      hypothesis: `The main comparison in "${source.title}" replicates at small scale, and it extends to a second task family.`,
      mechanism: `Replicate the headline experiment at the smallest published scale, then apply the unchanged method to a held-out task family to test transfer.`,
      baseline_to_beat: 'The replication target numbers from the source at the same scale.',
      success_threshold: 'Replication within the source-reported error bars, and a positive gain on the new task family.',
      kill_condition: 'The replication misses the reported numbers by more than twice the reported error.',
      expected_artifacts: ['run_notes.md', 'results/replication.json', 'results/extension.json'],
      required_evidence: ['replication scores', 'extension scores over three seeds'],
      estimated_runtime_class: 'overnight',
      expected_token_budget: 250_000,
      workload_class: 'inference_eval',
      likely_failure_modes: ['unreported training details', 'task family too far from the original'],
      similar_prior_projects: [],
    }),
  },
];

/** Up to `count` (at most three) candidates from the sources, oldest source first; empty when there are none. */
export function buildSmokeCandidates(sources: readonly SmokeSource[], count = SMOKE_BATCH_MAX): CandidateProposal[] {
  const ordered = [...sources].sort((a, b) => (a.source_id < b.source_id ? -1 : a.source_id > b.source_id ? 1 : 0));
  const wanted = Math.max(0, Math.min(count, SMOKE_BATCH_MAX, ordered.length));
  return ordered.slice(0, wanted).map((source, index) => {
    const template = TEMPLATES[index % TEMPLATES.length]!;
    return {
      ...template.build(source),
      ...template.scores,
      generation_mode: template.mode,
      dedupe_key: `smoke:${source.source_id.toLowerCase().replace(/[^a-z0-9._-]/g, '-')}:${template.mode}`,
      source_ids: [source.source_id],
      source_urls: source.url ? [source.url] : [],
    };
  });
}
