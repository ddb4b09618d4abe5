import { z } from 'zod';
import { WORKLOAD_CLASSES } from '../../../worker-gate/contract/workload.ts';

/** Research Facility vocabulary (docs/research.md#research-facility-intake). One source of truth. */

export const GENERATION_MODES = [
  'fresh_grounded',
  'followup_from_negative',
  'moonshot',
  'implementation_gap',
  'paper_replication_extension',
  'home_hardware_accessibility',
  'manual_import',
] as const;
export type GenerationMode = (typeof GENERATION_MODES)[number];

export const ADMISSION_DECISIONS = ['admitted', 'rejected', 'merged', 'needs-review'] as const;
export type AdmissionDecision = (typeof ADMISSION_DECISIONS)[number];

/** How long a candidate's experiment is expected to run. */
export const RUNTIME_CLASSES = ['minutes', 'hours', 'overnight', 'days', 'week_plus'] as const;
export type RuntimeClass = (typeof RUNTIME_CLASSES)[number];

export const SOURCE_KINDS = [
  'paper',
  'repository',
  'blog',
  'social_post',
  'prior_result',
  'user_batch',
  'generated_hypothesis',
] as const;
export type SourceKind = (typeof SOURCE_KINDS)[number];

export const DEDUPE_KEY_PATTERN = /^[a-z0-9][a-z0-9._:/-]{2,199}$/;

const text = (max: number) => z.string().trim().min(1).max(max);
const textList = (maxItems: number) => z.array(text(1000)).max(maxItems);
const dimension = () => z.number().min(0).max(10);

/**
 * A candidate as proposed (imported by an operator or built by a generator). Contract fields are optional here so
 * that a candidate missing one is still read and then rejected by the planner with a readable reason, not a 422;
 * types and bounds are enforced here.
 */
export const CandidateProposalSchema = z.strictObject({
  title: text(300),
  generation_mode: z.enum(GENERATION_MODES).default('manual_import'),
  hypothesis: text(4000).optional(),
  mechanism: text(4000).optional(),
  baseline_to_beat: text(2000).optional(),
  success_threshold: text(2000).optional(),
  kill_condition: text(2000).optional(),
  expected_artifacts: textList(50).default([]),
  required_evidence: textList(50).default([]),
  estimated_runtime_class: z.enum(RUNTIME_CLASSES).optional(),
  expected_token_budget: z.number().int().positive().max(1_000_000_000).optional(),
  machine_target: z.string().min(1).max(200).optional(),
  workload_class: z.enum(WORKLOAD_CLASSES).optional(),
  /** What its runs need of their worker (docs/runs.md#slots-and-gpus); left out: the workload class's default. */
  gpu_count: z.number().int().min(0).max(64).optional(),
  gpu_memory_mib: z.number().int().min(0).max(16_777_216).optional(),
  cpu_count: z.number().int().min(1).max(4096).optional(),
  likely_failure_modes: textList(50).default([]),
  /** Required when similar_prior_projects is not empty. */
  novelty_comparison: text(4000).optional(),
  dedupe_key: z.string().regex(DEDUPE_KEY_PATTERN, 'must be 3–200 lowercase letters, digits, ".", "_", ":", "/" or "-"'),
  source_ids: z.array(z.string().min(1).max(200)).max(50).default([]),
  source_urls: z.array(z.url({ protocol: /^https?$/ })).max(50).default([]),
  parent_project_id: z.string().min(1).max(200).optional(),
  parent_run_id: z.string().min(1).max(200).optional(),
  similar_prior_projects: z.array(z.string().min(1).max(200)).max(50).default([]),
  accessibility_delta: text(2000).optional(),
  /** Dimension scores, 0–10. */
  novelty: dimension(),
  feasibility: dimension(),
  accessibility: dimension().optional(),
  falsifiability: dimension().optional(),
});
export type CandidateProposal = z.output<typeof CandidateProposalSchema>;

/**
 * The data-level checks, rules 1 and 2 of docs/research.md#research-facility-intake, mirrored by CHECK constraints on `research_candidates`:
 * a candidate failing one is never stored as a candidate row (its rejection is still an admission row).
 */
export function dataCheckFailure(proposal: Pick<CandidateProposal, 'generation_mode' | 'source_ids' | 'source_urls' | 'parent_project_id' | 'parent_run_id'>): string | null {
  if (proposal.generation_mode === 'fresh_grounded' && proposal.source_ids.length === 0 && proposal.source_urls.length === 0) {
    return 'fresh_grounded candidates need at least one source (rule 1)';
  }
  if (proposal.generation_mode === 'followup_from_negative' && !proposal.parent_project_id && !proposal.parent_run_id) {
    return 'followup_from_negative candidates need a parent project or run (rule 2)';
  }
  return null;
}

/** A project id derived from a candidate's dedupe key: lowercase letters, digits, ".", "_" and "-". */
export function projectIdFor(dedupeKey: string): string {
  return dedupeKey.toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^-+/, '').slice(0, 120);
}
