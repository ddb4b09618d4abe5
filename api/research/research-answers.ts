import { z } from 'zod';
import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';
import { ADMISSION_DECISIONS, GENERATION_MODES, RUNTIME_CLASSES } from '../../capabilities/research/domain/research-candidate.ts';
import { HARD_FAILURE_CODES } from '../../capabilities/research/domain/research-decision.ts';
import type { ScoreBreakdown } from '../../capabilities/research/domain/research-scoring.ts';
import { foreignObject, type Assert, type Documents } from '../../platform/http/responses.ts';
import { LINEAGE_KINDS, type LineageRow } from '../../capabilities/research/research-lineage.ts';
import type { AdmissionRow } from '../../capabilities/research/research-admissions.ts';
import type { CandidateRow } from '../../capabilities/research/research-candidates.ts';

/**
 * The research room's answers: lineage, candidates, admissions and how a candidate was scored. A row is this schema
 * wherever it appears, and each names every column its row type has (`Documents` fails the build otherwise).
 */

export const LineageSchema = z.object({
  lineage_id: z.number().int(),
  from_kind: z.enum(LINEAGE_KINDS),
  from_id: z.string(),
  to_kind: z.enum(LINEAGE_KINDS),
  to_id: z.string(),
  relation: z.string().describe('Lowercase, e.g. grounded_by, promoted_to, followup_of'),
  created_at: z.string(),
}).meta({ id: 'Lineage' });
export type LineageDocumented = Assert<Documents<typeof LineageSchema, LineageRow>>;

const LEDGER_RECORD = 'Open: the research ledgers are append-only, and a row keeps what the version that wrote it recorded';

export const CandidateSchema = z.object({
  candidate_id: z.string(),
  batch_id: z.string(),
  generation_mode: z.enum(GENERATION_MODES),
  title: z.string(),
  hypothesis: z.string().nullable(),
  mechanism: z.string().nullable(),
  baseline_to_beat: z.string().nullable(),
  success_threshold: z.string().nullable(),
  kill_condition: z.string().nullable(),
  expected_artifacts: z.array(z.string()),
  required_evidence: z.array(z.string()),
  estimated_runtime_class: z.enum(RUNTIME_CLASSES).nullable(),
  expected_token_budget: z.number().int().nullable(),
  machine_target: z.string().nullable(),
  workload_class: z.enum(WORKLOAD_CLASSES).nullable(),
  gpu_count: z.number().int().nullable().describe("GPUs its runs need; null: the workload class's default (docs/runs.md#slots-and-gpus)"),
  gpu_memory_mib: z.number().int().nullable().describe('GPU memory (MiB) its runs need free on each GPU; null: the class default'),
  cpu_count: z.number().int().nullable().describe('CPUs its runs are pinned to; null: the class default'),
  likely_failure_modes: z.array(z.string()),
  novelty_comparison: z.string().nullable(),
  dedupe_key: z.string(),
  source_ids: z.array(z.string()),
  source_urls: z.array(z.string()),
  parent_project_id: z.string().nullable(),
  parent_run_id: z.string().nullable(),
  similar_prior_projects: z.array(z.string()),
  accessibility_delta: z.string().nullable(),
  novelty: z.number(),
  feasibility: z.number(),
  accessibility: z.number().nullable(),
  falsifiability: z.number().nullable(),
  score: z.number(),
  decision: z.enum(ADMISSION_DECISIONS),
  merged_into: z.string().nullable(),
  queue_admitted: z.boolean().describe('Promoted into the queue'),
  text_fingerprint: z.string().nullable(),
  proposal: foreignObject(`The candidate as its source proposed it. ${LEDGER_RECORD}`),
  created_at: z.string(),
  updated_at: z.string(),
}).meta({ id: 'Candidate' });
export type CandidateDocumented = Assert<Documents<typeof CandidateSchema, CandidateRow>>;

/** How the planner made up a candidate's score: in a batch's answer, and as the admission ledger records it. */
export const ScoreBreakdownSchema = z
  .object({
    novelty: z.number(),
    feasibility: z.number(),
    accessibility: z.number().describe('After fallback'),
    falsifiability: z.number().describe('After fallback'),
    accessibility_fallback: z.boolean(),
    falsifiability_fallback: z.boolean(),
    weighted: z.number().describe('The weighted sum of the four dimensions, rounded to 0.1'),
    mode_bonus: z.number(),
    mode_bonus_reason: z.string(),
    score: z.number().describe('weighted + mode_bonus, within 0–100, rounded to 0.1'),
  })
  .meta({ id: 'ScoreBreakdown', description: 'How the planner made up a candidate\'s 0–100 score' });
export type ScoreBreakdownDocumented = Assert<Documents<typeof ScoreBreakdownSchema, ScoreBreakdown>>;

export const AdmissionSchema = z.object({
  admission_id: z.number().int(),
  candidate_id: z.string().nullable().describe('Null when a data-level check kept the candidate out of the candidate ledger'),
  batch_id: z.string(),
  dedupe_key: z.string(),
  generation_mode: z.enum(GENERATION_MODES),
  title: z.string(),
  decision: z.enum(ADMISSION_DECISIONS),
  score: z.number(),
  reasons: z.array(z.string()),
  hard_failures: z.array(z.object({ code: z.string(), message: z.string() })),
  score_breakdown: ScoreBreakdownSchema.nullable().describe('How the planner made up the score; null where the admission was not scored'),
  merged_into: z.string().nullable(),
  planner_version: z.string(),
  candidate_snapshot: foreignObject(`The candidate as the planner saw it. ${LEDGER_RECORD}`),
  decided_by: z.string(),
  decided_at: z.string(),
}).meta({ id: 'Admission' });
export type AdmissionDocumented = Assert<Documents<typeof AdmissionSchema, AdmissionRow>>;

/** One planned candidate of a batch: its decision, score and how the score was made up. */
export const CandidateResultSchema = z.object({
  index: z.number().int().describe('Position in the batch, from 0'),
  candidate_id: z.string().nullable(),
  title: z.string(),
  dedupe_key: z.string(),
  generation_mode: z.string(),
  decision: z.enum(ADMISSION_DECISIONS),
  score: z.number(),
  breakdown: ScoreBreakdownSchema,
  reasons: z.array(z.string()),
  hard_failures: z.array(z.object({ code: z.enum(HARD_FAILURE_CODES), message: z.string() })),
  merged_into: z.string().nullable(),
  stored: z.boolean().describe('False when a data-level check kept the candidate out of the candidate ledger'),
}).meta({ id: 'CandidateResult' });
