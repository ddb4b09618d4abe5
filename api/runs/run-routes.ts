import { RunCauseSchema, TokenUsageSchema } from '../../worker-gate/contract/callback-body.ts';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponses, type Assert, type Documents } from '../../platform/http/responses.ts';
import { queryInt } from '../../platform/http/validation.ts';
import { AuditEventSchema } from '../audit-event-answer.ts';
import { PaperSchema } from '../papers/paper-answers.ts';
import { ProjectSchema, RunWithTransitionsSchema } from './run-answers.ts';
import { QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';
import { RUN_STATES } from '../../capabilities/runs/domain/run-state.ts';
import { quietWindowsOf, runGateView, type QuietWindowView } from '../../capabilities/runs/run-gate-view.ts';
import { cancelRun, runDetail, type CancelRunResult } from '../../capabilities/runs/runs.ts';
import { answerRun } from '../../capabilities/runs/run-answers.ts';
import { resumeRun } from '../../capabilities/runs/run-resumes.ts';
import { readRunFile, readRunFiles } from '../../capabilities/runs/run-files.ts';
import { RunFileContentSchema, RunFileQuerySchema, RunFilesSchema } from '../../worker-gate/contract/run-files.ts';
import type { AgentAnswer } from '../../capabilities/runs/domain/agent-answer.ts';
import { AgentQuestionSchema, PERMISSION_DECISIONS, QUESTION_LABEL_MAX } from '../../worker-gate/contract/agent-question.ts';
import { idempotencyKey, requestedBy } from '../command-fields.ts';
import type { AppDeps } from '../deps.ts';

const RunParams = z.strictObject({ run_id: z.string().min(1).max(200) });
const CancelBody = z
  .strictObject({
    requested_by: z.string().trim().min(1).max(200).default('operator'),
    reason: z.string().trim().min(1).max(2000).optional(),
  })
  .default({ requested_by: 'operator' });

/** The longest answer in words, and the longest note with a choice or a permission decision. */
const ANSWER_TEXT_MAX = 8_000;
const ANSWER_NOTE_MAX = 2_000;

const AnswerBody = z
  .strictObject({
    requested_by: requestedBy,
    idempotency_key: idempotencyKey,
    answer: z.string().trim().min(1).max(ANSWER_TEXT_MAX).optional().describe("The answer, in words, to a question"),
    choice: z.string().min(1).max(QUESTION_LABEL_MAX).optional().describe("One of the question's options, by its label"),
    permission: z.enum(PERMISSION_DECISIONS).optional().describe('For a permission request: allow this call once, allow the tool for the rest of the run, or deny'),
    note: z.string().trim().min(1).max(ANSWER_NOTE_MAX).optional().describe('Words for the agent with a choice or a permission decision'),
  })
  .superRefine((body, context) => {
    const given = (['answer', 'choice', 'permission'] as const).filter((name) => body[name] !== undefined);
    if (given.length !== 1) context.addIssue({ code: 'custom', path: given.length === 0 ? ['answer'] : [given[1]!], message: 'give exactly one of answer, choice or permission' });
    if (body.note !== undefined && body.answer !== undefined) context.addIssue({ code: 'custom', path: ['note'], message: 'note goes with choice or permission; put everything in answer' });
  });

/** The answer as the service takes it: exactly one of its kinds, checked by the body's schema. */
function agentAnswerOf(body: z.output<typeof AnswerBody>): AgentAnswer {
  if (body.permission !== undefined) return { kind: 'permission', decision: body.permission, note: body.note };
  if (body.choice !== undefined) return { kind: 'choice', choice: body.choice, note: body.note };
  return { kind: 'text', text: body.answer ?? '' };
}

const ResumeBody = z.strictObject({
  requested_by: requestedBy,
  idempotency_key: idempotencyKey,
  note: z.string().trim().min(1).max(ANSWER_NOTE_MAX).optional().describe('Why the run is resumed early, for its audit trail'),
});

const ResumeAnswer = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  limit_number: z.number().int().describe("Which of the run's usage limits this resumes: the n-th is n"),
  resumes_at: z.string().describe('When the run would have resumed by itself'),
  replayed: z.boolean().describe('True when this idempotency_key had asked before: the first result is returned, and the request was sent to the run again'),
});
export type ResumeDocumented = Assert<Documents<typeof ResumeAnswer, Awaited<ReturnType<typeof resumeRun>>>>;

const AllowedToolAnswer = z.object({ rule: z.string(), scope: z.enum(['once', 'run']) });

const AnswerAnswer = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  answer_number: z.number().int().describe("The answer to the run's n-th question"),
  prompt: z.string().describe("What the agent's session resumes with"),
  allowed_tools: z.array(AllowedToolAnswer).describe('Tools the resumed session may use without asking, for its next session (once) or the rest of the run'),
  replayed: z.boolean().describe('True when this idempotency_key had answered before: the first answer is returned and nothing new was recorded'),
});
export type AnswerDocumented = Assert<Documents<typeof AnswerAnswer, Awaited<ReturnType<typeof answerRun>>>>;

const RecordedAnswerSchema = z.object({
  answer_number: z.number().int(),
  question: z.string().nullable(),
  question_detail: AgentQuestionSchema.nullable(),
  answer: z
    .discriminatedUnion('kind', [
      z.object({ kind: z.literal('text'), text: z.string() }),
      z.object({ kind: z.literal('choice'), choice: z.string(), note: z.string().optional() }),
      z.object({ kind: z.literal('permission'), decision: z.enum(PERMISSION_DECISIONS), note: z.string().optional() }),
    ])
    .describe('What the operator answered'),
  prompt: z.string(),
  allowed_tools: z.array(AllowedToolAnswer),
  requested_by: z.string(),
  created_at: z.string(),
});

const RunDetailQuery = z.strictObject({ event_limit: queryInt({ min: 1, max: 200, default: 50 }) });

const RunCallbackSchema = z.object({
  idempotency_key: z.string(),
  event_type: z.string(),
  gate_state: z.string().nullable(),
  reason: z.string().nullable(),
  ignored: z.boolean(),
  ignore_reason: z.string().nullable(),
  received_at: z.string(),
});

/** The quiet window's last verdict as the run's gate judged it (capabilities/runs/run-gate-view.ts). */
export const QuietWindowViewSchema = z.object({
  samples_in_window: z.number().int().describe('Quiet samples so far'),
  samples_needed: z.number().int().describe('Quiet samples the window needs: idle_sustain_sec over sample_interval_sec'),
  verdict: z.string().nullable().describe('waiting_for_process_exit, waiting_for_quiet_window, ready or timed_out'),
  reasons: z.array(z.string()).describe('Why the window is not quiet yet, e.g. "mean CPU 63% above threshold 20%"'),
  waiting_sec: z.number().nullable().describe('Seconds since the gate first saw idle, stop or end; null from a gate that does not say'),
  overdue: z.boolean().describe('Waiting far longer than idle_sustain_sec (3 times): the run needs a person'),
  idle_seen_at: z.string().nullable(),
});

const RunDetailAnswer = z.object({
  run: RunWithTransitionsSchema.extend({
    token_usage: TokenUsageSchema.nullable().describe("The agent's tokens as the worker last reported them; null when it reported none"),
    cause: RunCauseSchema.nullable().describe('Why the run ended, as the worker last reported it: model_error, crash, signal, token_budget, stall, exit or reaped; null when it reported none'),
  }),
  finished: z.boolean().describe('The run is in a final state: cancel would answer already_finished'),
  permission_effect: z.string().nullable().describe('For a waiting permission request: what allowing the call would do, in words'),
  answers: z.array(RecordedAnswerSchema).describe("The operator's answers to the agent's questions, first first"),
  callbacks: z.array(RunCallbackSchema).describe('The worker\'s completion callbacks for this run, newest first (at most 50)'),
  project: ProjectSchema.nullable(),
  papers: z.array(PaperSchema),
  events: z.array(AuditEventSchema),
  temporal: z.object({ workflow_id: z.string(), ui_url: z.string().nullable().describe('The run in the Temporal UI, when temporal_ui_url is set') }),
  quiet_window: QuietWindowViewSchema.nullable().describe(
    "While the run is in flight, its worker gate's quiet window: why it waits and its progress; null once finished, before the gate judges it, or when the gate cannot be asked within 2 s",
  ),
});
export type RunDetailDocumented = Assert<Documents<typeof RunDetailAnswer, Awaited<ReturnType<typeof runDetailWithWindow>>>>;

/** The run's detail with its gate's quiet window while it is in flight. */
async function runDetailWithWindow(deps: Pick<AppDeps, 'store' | 'runs' | 'dispatch'>, runId: string, eventLimit: number) {
  const detail = await runDetail({ store: deps.store, runs: deps.runs }, runId, eventLimit);
  const windows = detail.finished ? new Map<string, QuietWindowView>() : await quietWindowsOf(deps, [{ run_id: runId, lane: detail.run.lane }]);
  return { ...detail, quiet_window: windows.get(runId) ?? null };
}

const CancelAnswer = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  workflow_id: z.string(),
  already_finished: z.boolean().describe('The run had finished: nothing was canceled'),
  canceled: z.boolean().optional(),
  gate: z
    .object({
      tracked: z.boolean().describe('Whether the worker gate still tracked the run (false: it answered 404, or could not be asked)'),
      stopped: z.array(z.object({ pid: z.number().int(), outcome: z.string() })).describe("The run's processes the gate still had, and what became of each"),
      problem: z.string().optional().describe('Why the gate was not asked, or did not answer'),
    })
    .optional()
    .describe("For a finished run: what its worker gate did when asked to stop what it still tracks of the run"),
  state: z.enum(RUN_STATES),
  queue_status: z.enum(QUEUE_STATUSES).nullable(),
});

const CancelPendingAnswer = z.object({
  ok: z.literal(true),
  cancel_requested: z.literal(true),
  run_id: z.string(),
  workflow_id: z.string(),
}).describe('Cancellation requested; the workflow has not recorded it yet');
export type CancelDocumented = Assert<Documents<typeof CancelAnswer | typeof CancelPendingAnswer, Exclude<CancelRunResult, { pending: true }> | Omit<Extract<CancelRunResult, { pending: true }>, 'pending'>>>;

const RunGateViewAnswer = z.object({
  run_id: z.string(),
  lane: z.string(),
  finished: z.boolean().describe('The run is in a final state here'),
  seen: z.boolean().describe("Whether the lane's gate holds the run among its 50 most recently updated ones; false: every gate field below is null"),
  gate_state: z.string().nullable().describe("The gate's state of the run (running, waiting_for_process_exit, waiting_for_quiet_window, finished_ready, …)"),
  processes_alive: z.boolean().nullable().describe("Whether any of the run's tracked processes is alive"),
  quiet_window: QuietWindowViewSchema.nullable().describe("The quiet window's last verdict; null before the agent reported idle, stop or end"),
  gate_updated_at: z.string().nullable(),
});
export type RunGateViewDocumented = Assert<Documents<typeof RunGateViewAnswer, Awaited<ReturnType<typeof runGateView>>>>;

const tags = ['runs'];
const config = { auth: 'control' } as const;

export async function runRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'runs' | 'dispatch'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const runs = { store: deps.store, runs: deps.runs, dispatch: deps.dispatch };

  const detail = {
    tags,
    summary: 'One run with its transitions, its worker callbacks, its project, recent events and its Temporal workflow',
    params: RunParams,
    querystring: RunDetailQuery,
    response: { 200: RunDetailAnswer, ...errorResponses(401, 404, 422) },
  };
  app.get('/control/api/v1/runs/:run_id', { config, schema: detail }, async (request) =>
    runDetailWithWindow(deps, request.params.run_id, request.query.event_limit),
  );

  const gateView = {
    tags,
    summary: "One run as its worker gate sees it now, asked of the lane's gate: gate state, live processes and the quiet window's progress",
    params: RunParams,
    response: { 200: RunGateViewAnswer, ...errorResponses(401, 404, 409, 422, 502) },
  };
  app.get('/control/api/v1/runs/:run_id/gate', { config, schema: gateView }, async (request) => runGateView(deps, request.params.run_id));

  const files = {
    tags,
    summary: "The run's result files, asked of its worker gate: run_notes.md, the decision file and results/, with sizes and SHA-256 hashes",
    params: RunParams,
    response: { 200: RunFilesSchema, ...errorResponses(401, 404, 409, 422, 502) },
  };
  app.get('/control/api/v1/runs/:run_id/files', { config, schema: files }, async (request) => readRunFiles({ store: deps.store.reads, dispatch: deps.dispatch }, request.params.run_id));

  const file = {
    tags,
    summary: 'One result file of the run with its preview: text, Markdown or JSON cut at 256 KiB, a PNG, JPEG or SVG image whole up to 2 MiB',
    params: RunParams,
    querystring: RunFileQuerySchema,
    response: { 200: RunFileContentSchema, ...errorResponses(400, 401, 404, 409, 422, 502) },
  };
  app.get('/control/api/v1/runs/:run_id/files/content', { config, schema: file }, async (request) =>
    readRunFile({ store: deps.store.reads, dispatch: deps.dispatch }, request.params.run_id, request.query.path),
  );

  const answer = {
    tags,
    summary: "Answer the agent's question, or its permission request: the run's agent session resumes with the answer (docs/runs.md#answering-the-agent)",
    params: RunParams,
    body: AnswerBody,
    response: { 200: AnswerAnswer, ...errorResponses(401, 403, 404, 409, 422, 501, 503) },
  };
  app.post('/control/api/v1/runs/:run_id/answer', { config, schema: answer }, async (request) => {
    const { requested_by, idempotency_key } = request.body;
    return answerRun(runs, { run_id: request.params.run_id, answer: agentAnswerOf(request.body), requested_by, idempotency_key, request_id: request.id });
  });

  const resume = {
    tags,
    summary: "Resume a run that waits out the model's usage limit now, before its reset time: its workflow asks the gate to resume the agent's session (docs/runs.md#waiting-out-a-usage-limit)",
    params: RunParams,
    body: ResumeBody,
    response: { 200: ResumeAnswer, ...errorResponses(401, 403, 404, 409, 422, 501, 503) },
  };
  app.post('/control/api/v1/runs/:run_id/resume', { config, schema: resume }, async (request) => {
    const { requested_by, idempotency_key, note } = request.body;
    return resumeRun(runs, { run_id: request.params.run_id, requested_by, idempotency_key, note, request_id: request.id });
  });

  const cancel = {
    tags,
    summary: 'Cancel a run\'s workflow (idempotent); 202 while the workflow has not yet recorded it',
    params: RunParams,
    body: CancelBody,
    response: { 200: CancelAnswer, 202: CancelPendingAnswer, ...errorResponses(401, 403, 404, 422, 501, 503) },
  };
  app.post('/control/api/runs/:run_id/cancel', { config, schema: cancel }, async (request, reply) => {
    const runId = request.params.run_id;
    const body = request.body;
    const result = await cancelRun(runs, { run_id: runId, ...body, request_id: request.id });
    if ('pending' in result) {
      const { pending: _pending, ...answer } = result;
      return reply.code(202).send(answer);
    }
    return result;
  });
}
