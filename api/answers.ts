import { z } from 'zod';
import { RunCauseSchema, TokenUsageSchema } from '../worker-gate/contract/callback-body.ts';
import { PREFLIGHT_CHECK_NAMES } from '../capabilities/runs/domain/preflight-checks.ts';
import { FINDING_KINDS } from '../capabilities/automation/domain/alert-findings.ts';
import { PAPER_ACTIONS, PAPER_STAGES } from '../capabilities/papers/domain/paper-stage.ts';
import { CHECKLIST_ITEM_IDS, CHECKLIST_STATUSES, PAPER_STATUSES, REVIEW_STATUSES } from '../capabilities/papers/domain/paper-status.ts';
import { QUEUE_STATUSES } from '../capabilities/runs/domain/queue-status.ts';
import { RUN_STATES } from '../capabilities/runs/domain/run-state.ts';
import { WORKLOAD_CLASSES } from '../worker-gate/contract/workload.ts';
import { ADMISSION_DECISIONS, GENERATION_MODES, RUNTIME_CLASSES } from '../capabilities/research/domain/research-candidate.ts';
import { HARD_FAILURE_CODES } from '../capabilities/research/domain/research-decision.ts';
import type { ScoreBreakdown } from '../capabilities/research/domain/research-scoring.ts';
import { foreignObject, type Assert, type Documents } from '../platform/http/responses.ts';
import type { AuditEvent } from '../platform/store/audit-events.ts';
import type { FinalizationPackageRow } from '../capabilities/papers/paper-reads.ts';
import type { ChecklistItemRow, CorpusImportRow, PaperRow, ReviewHistoryRow } from '../capabilities/papers/paper-ledger.ts';
import type { ProjectDetail, ProjectRun } from '../capabilities/console/project-reads.ts';
import type { ProjectRow } from '../capabilities/runs/projects.ts';
import type { QueueItemRow } from '../capabilities/runs/queue-items.ts';
import { LINEAGE_KINDS, type LineageRow } from '../capabilities/research/research-lineage.ts';
import type { AdmissionRow } from '../capabilities/research/research-admissions.ts';
import type { CandidateRow } from '../capabilities/research/research-candidates.ts';
import type { RunListRow } from '../capabilities/runs/run-reads.ts';
import type { WorkerObservation } from '../capabilities/runs/worker-observations.ts';

/**
 * One schema per ledger row the answers show: a queue item, project, run, paper or event is this schema wherever it
 * appears. Each names every column its row type has (`Documents` fails the build otherwise).
 */

export const AuditEventSchema = z.object({
  id: z.number().int(),
  entity_type: z.string(),
  entity_id: z.string(),
  event_type: z.string().describe('`<entity>.<action>`, e.g. `paper_review.draft_rewritten` (docs/http.md#http-conventions)'),
  payload: foreignObject(
    'The event\'s own fields, by event_type. Open: the log is append-only, and an event keeps the fields of the version that wrote it',
  ),
  idempotency_key: z.string().nullable(),
  actor: z.string().nullable(),
  request_id: z.string().nullable(),
  created_at: z.string(),
}).meta({ id: 'AuditEvent' });
export type AuditEventDocumented = Assert<Documents<typeof AuditEventSchema, AuditEvent>>;

export const QueueItemSchema = z.object({
  project_id: z.string(),
  project_name: z.string(),
  status: z.enum(QUEUE_STATUSES),
  manual_review_required: z.boolean(),
  dispatch_priority: z.number().int().describe('Lower goes first'),
  selection_rank: z.number().int(),
  machine_target: z.string().nullable(),
  workload_class: z.enum(WORKLOAD_CLASSES),
  current_run_id: z.string().nullable(),
  last_run_state: z.string().nullable(),
  next_action_hint: z.string().nullable(),
  last_error: z.string().nullable(),
  candidate_id: z.string().nullable(),
  lane: z.string().nullable().describe('The worker target the item was last claimed on'),
  dispatch_failures: z.number().int().describe('Failed dispatch attempts in a row; the third moves the item to dispatch_error'),
  created_at: z.string(),
  updated_at: z.string(),
}).meta({ id: 'QueueItem' });
export type QueueItemDocumented = Assert<Documents<typeof QueueItemSchema, QueueItemRow>>;

export const FlagsSchema = z.object({ queue_paused: z.boolean(), maintenance_mode: z.boolean() });

export const ProjectSchema = z.object({
  project_id: z.string(),
  project_name: z.string(),
  project_dir: z.string().describe('Relative to the worker\'s project_root'),
  idea_id: z.string().nullable(),
  candidate_id: z.string().nullable(),
  workload_class: z.enum(WORKLOAD_CLASSES),
  machine_target: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
}).meta({ id: 'Project' });
export type ProjectDocumented = Assert<Documents<typeof ProjectSchema, ProjectRow>>;

const EvidenceFileSchema = z.object({ path: z.string(), sha256: z.string(), bytes: z.number().int() });

/** What a draft was written from, as its draft step recorded it. */
const EvidenceSummarySchema = z.object({
  sha256: z.string().describe('Of the evidence files together'),
  files: z.array(z.string()),
  file_hashes: z.array(EvidenceFileSchema).optional().describe('Each file\'s sha256; absent in drafts recorded before packages checked them'),
  decision: z.string().nullable(),
});

/** A paper: the paper lists, its detail, a project's and a run's detail all show this row. */
export const PaperSchema = z.object({
  paper_id: z.string(),
  project_id: z.string(),
  run_id: z.string(),
  paper_status: z.enum(PAPER_STATUSES),
  review_status: z.enum(REVIEW_STATUSES),
  rank_score: z.number(),
  rank_reasons: z.array(z.string()),
  title: z.string().nullable(),
  writer: z.enum(['deterministic', 'hosted']).nullable(),
  writer_fallback_reason: z.string().nullable(),
  draft_dir: z.string().nullable().describe('Relative to state_dir'),
  draft_artifacts: z.array(EvidenceFileSchema),
  evidence_summary: EvidenceSummarySchema.nullable(),
  draft_count: z.number().int(),
  drafted_at: z.string().nullable(),
  rewrite_count: z.number().int(),
  rewritten_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  imported: z.boolean().describe('A corpus import is recorded for the paper'),
  stage: z.enum(PAPER_STAGES).describe('Where the paper stands, to show a person: imported once a corpus import is recorded, finalized once the review is, else paper_status (which stays where the last draft left it)'),
  operator_actions: z.array(z.enum(PAPER_ACTIONS)).describe('The commands the paper takes now: rewrite_draft (POST …/rewrite-draft), set_checklist_item (…/checklist/{item_id}), move_review (…/status), prepare_finalization_package, record_import; none once imported'),
}).meta({ id: 'Paper' });
export type PaperDocumented = Assert<Documents<typeof PaperSchema, PaperRow>>;

export const ChecklistItemSchema = z.object({
  item_id: z.enum(CHECKLIST_ITEM_IDS),
  status: z.enum(CHECKLIST_STATUSES),
  note: z.string().nullable(),
  judged_by: z.string().nullable().describe('automated, or who set it'),
  updated_at: z.string().describe('For an item never written, when the paper was created'),
}).meta({ id: 'ChecklistItem' });
export type ChecklistItemDocumented = Assert<Documents<typeof ChecklistItemSchema, ChecklistItemRow>>;

/** A paper with its checklist, every item in the order of the item list. */
export const PaperWithChecklistSchema = PaperSchema.extend({ checklist: z.array(ChecklistItemSchema) });

export const ReviewHistorySchema = z.object({
  history_id: z.number().int(),
  paper_id: z.string(),
  from_status: z.enum(REVIEW_STATUSES).nullable(),
  to_status: z.enum(REVIEW_STATUSES),
  note: z.string().nullable(),
  blocker: z.string().nullable(),
  requested_by: z.string(),
  created_at: z.string(),
}).meta({ id: 'ReviewHistory' });
export type ReviewHistoryDocumented = Assert<Documents<typeof ReviewHistorySchema, ReviewHistoryRow>>;

export const FinalizationPackageSchema = z.object({
  package_id: z.number().int(),
  target_label: z.string(),
  package_dir: z.string().describe('Relative to state_dir'),
  manifest_sha256: z.string(),
  requested_by: z.string(),
  created_at: z.string(),
}).meta({ id: 'FinalizationPackage' });
export type FinalizationPackageDocumented = Assert<Documents<typeof FinalizationPackageSchema, FinalizationPackageRow>>;

export const CorpusImportSchema = z.object({
  paper_id: z.string(),
  corpus_repo: z.string(),
  commit_sha: z.string(),
  manifest_sha256: z.string(),
  requested_by: z.string(),
  created_at: z.string(),
}).meta({ id: 'CorpusImport' });
export type CorpusImportDocumented = Assert<Documents<typeof CorpusImportSchema, CorpusImportRow>>;

export const GATE_ANSWER = 'Open: the worker gate decides its shape, and a gate of another implementation may answer differently (docs/worker-gate.md#worker-gate)';

/** Every column of a run. */
export const RunSchema = z.object({
  run_id: z.string(),
  project_id: z.string(),
  workflow_id: z.string(),
  state: z.enum(RUN_STATES),
  lane: z.string(),
  wake_gate_url: z.string(),
  workload_class: z.enum(WORKLOAD_CLASSES),
  requested_by: z.string(),
  session_id: z.string().nullable(),
  question: z.string().nullable(),
  decision: z.string().nullable(),
  decision_summary: z.string().nullable(),
  evidence: foreignObject(`The evidence the completion callback carried. ${GATE_ANSWER}`).nullable(),
  prepare_result: foreignObject(`The gate's answer to /prepare-project. ${GATE_ANSWER}`).nullable(),
  dispatch_result: foreignObject(`The gate's answer to /dispatch. ${GATE_ANSWER}`).nullable(),
  last_error: z.string().nullable(),
  finished_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
}).meta({ id: 'Run' });

export const TransitionSchema = z.object({
  transition: z.string(),
  from_state: z.string().nullable(),
  to_state: z.string(),
  queue_status: z.enum(QUEUE_STATUSES).nullable(),
  created_at: z.string(),
}).meta({ id: 'Transition' });

/** A run with the transitions applied to it, in order (a project's and a run's detail). */
export const RunWithTransitionsSchema = RunSchema.extend({ transitions: z.array(TransitionSchema) });
export type RunDocumented = Assert<Documents<typeof RunWithTransitionsSchema, ProjectRun>>;

/** A run as the run list shows it: without the gate's large answers, with its paper's status and token usage. */
export const RunListRowSchema = RunSchema.omit({ wake_gate_url: true, evidence: true, prepare_result: true, dispatch_result: true }).extend({
  workload_class: z.string(),
  paper_status: z.enum(PAPER_STATUSES).nullable().describe('The status of the run\'s paper; null when it has none'),
  token_usage: TokenUsageSchema.nullable().describe("The agent's tokens as the worker last reported them; null when it reported none"),
  cause: RunCauseSchema.nullable().describe('Why the run ended, as the worker last reported it; null when it reported none'),
});
export type RunListRowDocumented = Assert<Documents<typeof RunListRowSchema, RunListRow>>;

export const PreflightCheckSchema = z.object({
  name: z.enum(PREFLIGHT_CHECK_NAMES),
  ok: z.boolean(),
  detail: z.string().describe('One readable sentence'),
  data: foreignObject(`The figures the check judged, as the gate reported them. ${GATE_ANSWER}`),
}).meta({ id: 'PreflightCheck' });

export const WorkerObservationSchema = z.object({
  observation_id: z.number().int(),
  target: z.string(),
  wake_gate_url: z.string(),
  ok: z.boolean(),
  summary: z.string(),
  checks: z.array(PreflightCheckSchema),
  run_id: z.string().nullable().describe('The run whose dispatch ran this preflight'),
  observed_at: z.string(),
}).meta({ id: 'WorkerObservation' });
export type WorkerObservationDocumented = Assert<Documents<typeof WorkerObservationSchema, WorkerObservation>>;

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

/** A project's detail: `GET /control/api/projects/{project_id}` and its v1 twin answer the same body. */
export const ProjectDetailAnswer = z.object({
  project: ProjectSchema.nullable(),
  queue_item: QueueItemSchema.nullable(),
  runs: z.array(RunWithTransitionsSchema),
  papers: z.array(PaperSchema),
  events: z.array(AuditEventSchema),
  worker_observations: z.array(WorkerObservationSchema),
  lineage: z.array(LineageSchema),
});
export type ProjectDetailDocumented = Assert<Documents<typeof ProjectDetailAnswer, ProjectDetail>>;

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

/** What a queue check found: the same shape in its answer and in the checks queue health reads back. */
export const AlertFindingSchema = z.object({
  kind: z.enum(FINDING_KINDS),
  severity: z.enum(['critical', 'warning', 'info']),
  entity_type: z.enum(['run', 'queue_item', 'worker']),
  entity_id: z.string(),
  message: z.string(),
  first_seen_at: z.string(),
}).meta({ id: 'AlertFinding' });

const WORKER_ROLES = ['gpu_worker', 'cpu_worker'] as const;

/** The worker target a queue item is (or would be) dispatched to: dispatch-next, a lane and a cycle's stage show it. */
export const DispatchRouteSchema = z.object({ machine_target: z.string(), wake_gate_url: z.string(), worker_role: z.enum(WORKER_ROLES), token_configured: z.boolean() });
