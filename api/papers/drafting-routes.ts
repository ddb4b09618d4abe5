import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PAPER_STATUSES, REVIEW_STATUSES } from '../../capabilities/papers/domain/paper-status.ts';
import { errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { PaperSchema, PaperWithChecklistSchema } from './paper-answers.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import type { PaperDrafting } from '../../capabilities/papers/paper-drafting.ts';
import { idempotencyKey, requestedBy } from '../command-fields.ts';
import type { AppDeps } from '../deps.ts';
import { REVIEW_MOUNTS } from './paper-routes.ts';

/**
 * Drafting and finalizing papers (docs/papers.md#papers): draft-next, and under both review mounts rewrite-draft,
 * rewrite-batch and prepare-finalization-package. The live calls wait for the paper workflows they start.
 */

/** The most papers one rewrite-batch rewrites. */
export const REWRITE_BATCH_MAX = 200;

const DraftNextBody = z.strictObject({
  dry_run: z.boolean().default(true),
  requested_by: requestedBy,
  force: z.boolean().default(false).describe('Also redraft papers already drafted (draft_review, human_review_required)'),
});

const RewriteBody = z.strictObject({
  idempotency_key: idempotencyKey,
  requested_by: requestedBy,
  force: z.boolean().default(false).describe('Rewrite even a draft whose review is in_review or approved_for_finalization'),
});

const RewriteBatchBody = z.strictObject({
  idempotency_key: idempotencyKey,
  requested_by: requestedBy,
  paper_status: z.enum(PAPER_STATUSES).optional(),
  review_status: z.enum(REVIEW_STATUSES).optional(),
  search: z.string().max(200).optional(),
  limit: z.number().int().min(1).max(REWRITE_BATCH_MAX).default(10),
  force: z.boolean().default(false),
  dry_run: z.boolean().default(false),
  skip_rewritten: z.boolean().default(false).describe('Leave out papers rewritten before'),
});

const PackageBody = z.strictObject({
  idempotency_key: idempotencyKey,
  requested_by: requestedBy,
  target_label: z.string().trim().min(1).max(200),
  dry_run: z.boolean().default(false),
});

const PaperParams = z.strictObject({ paper_id: z.string().min(1).max(400) });

const EvidenceSyncSchema = z
  .object({
    ok: z.boolean(),
    source: z.string().describe('Where the evidence came from, e.g. root@host:2222:/srv/projects/p1'),
    destination: z.string(),
    command: z.string().describe('The command line that ran; empty when none did'),
    exit_code: z.number().int().nullable(),
    timed_out: z.boolean(),
    copied: z.array(z.string()),
    over_cap: z.boolean(),
    error: z.string().nullable(),
    duration_ms: z.number(),
  })
  .describe('What evidence sync tried and found');

const SecretFindingsSchema = z
  .array(
    z.object({
      file: z.string().describe('The evidence (or package) file holding them'),
      secrets: z.array(z.string()).describe('Which of the service\'s secrets, by config field or environment variable and encoding; never a value'),
    }),
  )
  .describe('Files holding secret values of this service (docs/security.md#security-model)');

const DraftedSchema = z.object({
  outcome: z.literal('drafted'),
  paper_id: z.string(),
  purpose: z.enum(['draft', 'rewrite']),
  paper_status: z.enum(PAPER_STATUSES),
  writer: z.enum(['deterministic', 'hosted']),
  writer_fallback_reason: z.string().nullable(),
  checklist_passed: z.boolean(),
  evidence_sync: EvidenceSyncSchema.nullable(),
});

/** What one paper step came to. */
const StepResultSchema = z.discriminatedUnion('outcome', [
  DraftedSchema,
  z.object({ outcome: z.literal('evidence_missing'), paper_id: z.string(), project_path: z.string(), missing: z.array(z.string()), evidence_sync: EvidenceSyncSchema.nullable() }),
  z.object({ outcome: z.literal('refused'), paper_id: z.string(), reason: z.string() }),
  z
    .object({ outcome: z.literal('held_for_review'), paper_id: z.string(), reason: z.string(), secrets: SecretFindingsSchema })
    .describe('The evidence holds secret values of this service: nothing was written or sent, and the paper is held for human review'),
  z.object({ outcome: z.literal('failed'), paper_id: z.string(), error: z.string() }),
]);

const paperRef = { paper_id: z.string(), project_id: z.string(), run_id: z.string() };
const SkippedSchema = z.object({
  ...paperRef,
  reason: z.enum(['missing_evidence', 'in_progress', 'refused']),
  detail: z.string(),
  missing: z.array(z.string()).optional(),
  evidence_sync: EvidenceSyncSchema.nullable().optional(),
});
const skipped = z.array(SkippedSchema).describe('Candidates passed over, each with its reason');

const DraftNextAnswer = z.discriminatedUnion('action', [
  z.object({ action: z.literal('noop'), reason: z.string(), skipped }),
  z.object({
    action: z.literal('dry_run_draft'),
    ...paperRef,
    project_name: z.string(),
    redraft: z.boolean().describe('The paper has a draft already'),
    writer: z.enum(['deterministic', 'openai_compatible']),
    evidence: z
      .object({
        complete: z.boolean(),
        project_path: z.string(),
        found: z.array(z.string()),
        missing: z.array(z.string()),
        secrets: SecretFindingsSchema.describe('Files holding secret values of this service: a live draft is refused (409) and the paper held for human review'),
        sync: z.string().describe('off, or where a live draft copies the evidence from'),
      })
      .describe('The dry run\'s evidence check of the paper it would draft'),
    skipped,
  }),
  z.object({ action: z.literal('drafted'), ...paperRef, result: DraftedSchema, paper: PaperWithChecklistSchema.nullable(), skipped }),
]);
export type DraftNextDocumented = Assert<Documents<typeof DraftNextAnswer, Awaited<ReturnType<PaperDrafting['draftNext']>>>>;

const CommandAnswer = z.object({ ok: z.literal(true), paper_id: z.string(), changed: z.boolean(), result: StepResultSchema, paper: PaperWithChecklistSchema.nullable() });

const SelectedSchema = PaperSchema.pick({ paper_id: true, project_id: true, run_id: true, paper_status: true, review_status: true, rank_score: true, title: true });
const BatchAnswer = z.union([
  z.object({ ok: z.literal(true), dry_run: z.literal(true), selected: z.array(SelectedSchema), count: z.number().int(), limit: z.number().int() }),
  z.object({ ok: z.literal(true), dry_run: z.literal(false), count: z.number().int(), rewritten: z.number().int(), results: z.array(StepResultSchema) }),
]);

const ManifestSchema = z.object({
  paper_id: z.string(),
  project_id: z.string(),
  run_id: z.string(),
  title: z.string().nullable(),
  target_label: z.string(),
  files: z.array(z.object({ path: z.string(), sha256: z.string(), bytes: z.number().int() })),
});
const PackageAnswer = z.union([
  z.object({
    ok: z.literal(true),
    dry_run: z.literal(true),
    paper_id: z.string(),
    ready: z.boolean(),
    waiting_for: z.array(z.string()).describe('What the live call still waits for'),
    package_dir: z.string(),
    manifest: ManifestSchema,
    manifest_sha256: z.string(),
  }),
  z.object({ ok: z.literal(true), dry_run: z.literal(false), paper_id: z.string(), package_dir: z.string(), manifest: ManifestSchema, manifest_sha256: z.string(), paper: PaperWithChecklistSchema }),
]);

export async function paperDraftingRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'paperDrafting' | 'paperPackages' | 'metrics'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const { paperDrafting: drafting, paperPackages: packages } = deps;
  const config = { auth: 'control' } as const;

  /** Counts each answer by command and outcome (an action, `replied`, or the refusal's status). */
  async function observed<T>(command: string, outcomeOf: (answer: T) => string, work: () => Promise<T>): Promise<T> {
    try {
      const answer = await work();
      deps.metrics.paperStepOutcomes.inc({ command, outcome: outcomeOf(answer) });
      return answer;
    } catch (error) {
      deps.metrics.paperStepOutcomes.inc({ command, outcome: error instanceof CommandRefusedError ? String(error.status) : 'failed' });
      throw error;
    }
  }

  app.post(
    '/control/papers/draft-next',
    {
      config,
      schema: {
        tags: ['papers'],
        summary:
          'Which paper would be drafted next and its evidence check (dry run, the default), or draft it: candidates lacking evidence are skipped (noop), never a 424; evidence holding the service\'s secrets is refused (409) and its paper held for human review',
        body: DraftNextBody,
        response: { 200: DraftNextAnswer, ...errorResponses(401, 403, 409, 422, 502, 503) },
      },
    },
    async (request) => observed('draft-next', (answer) => answer.action, () => drafting.draftNext(request.body)),
  );

  for (const mount of REVIEW_MOUNTS) {
    const tags = ['paper reviews'];
    app.post(
      `${mount}/:paper_id/rewrite-draft`,
      {
        config,
        schema: {
          tags,
          summary: 'Rewrite the draft with the configured writer (evidence synced first when evidence sync is on); 424 when the evidence is still missing',
          params: PaperParams,
          body: RewriteBody,
          response: { 200: CommandAnswer, ...errorResponses(401, 403, 404, 409, 422, 424, 502, 503) },
        },
      },
      async (request) => observed('rewrite-draft', () => 'drafted', () => drafting.rewriteDraft(request.params.paper_id, request.body)),
    );

    app.post(
      `${mount}/rewrite-batch`,
      {
        config,
        schema: {
          tags,
          summary: `Rewrite up to limit (default 10, at most ${REWRITE_BATCH_MAX}) papers, highest rank first; synchronous, may take minutes; dry_run previews the selection`,
          body: RewriteBatchBody,
          response: { 200: BatchAnswer, ...errorResponses(401, 403, 409, 422, 503) },
        },
      },
      async (request) => observed('rewrite-batch', (answer) => (answer.dry_run ? 'dry_run' : 'rewritten'), () => drafting.rewriteBatch(request.body)),
    );

    app.post(
      `${mount}/:paper_id/prepare-finalization-package`,
      {
        config,
        schema: {
          tags,
          summary: 'Once the automated checklist has passed: the package manifest (dry run), or, once final_human_approval passed, write the package and finalize the review',
          params: PaperParams,
          body: PackageBody,
          response: { 200: PackageAnswer, ...errorResponses(401, 403, 404, 409, 422, 503) },
        },
      },
      async (request) =>
        observed('prepare-finalization-package', (answer) => (answer.dry_run ? 'dry_run' : 'prepared'), () => packages.prepare(request.params.paper_id, request.body, { request_id: request.id })),
    );
  }
}
