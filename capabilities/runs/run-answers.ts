import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { runIdempotent } from '../../platform/store/idempotency-keys.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import type { AgentQuestion, AllowedTool } from '../../worker-gate/contract/agent-question.ts';
import { answerProblem, resumeFor, type AgentAnswer } from './domain/agent-answer.ts';
import { getQueueItem } from './queue-items.ts';
import { getRun, transitionCount } from './run-ledger.ts';
import type { RunLauncher } from './run-launcher.ts';

/** Answering the agent's question (docs/runs.md#answering-the-agent): recorded once per key, then signalled to the run. */

export interface AnswerRunRequest {
  run_id: string;
  answer: AgentAnswer;
  requested_by: string;
  idempotency_key: string;
  request_id?: string | undefined;
}

export interface AnswerRunResult {
  ok: true;
  run_id: string;
  /** The answer's number within the run: the answer to its n-th question. */
  answer_number: number;
  /** What the gate resumes the agent's session with. */
  prompt: string;
  allowed_tools: AllowedTool[];
  /** True when this key had answered before: the first answer is returned, and nothing new was recorded. */
  replayed: boolean;
}

export interface RecordedAnswer {
  answer_number: number;
  question: string | null;
  question_detail: AgentQuestion | null;
  answer: AgentAnswer;
  prompt: string;
  allowed_tools: AllowedTool[];
  requested_by: string;
  created_at: string;
}

const ANSWER_COLUMNS = 'answer_number, question, question_detail, answer, prompt, allowed_tools, requested_by, created_at';

/** The answers given to a run, first first. */
export async function listRunAnswers(q: Queryable, runId: string): Promise<RecordedAnswer[]> {
  const result = await q.query<RecordedAnswer>(`SELECT ${ANSWER_COLUMNS} FROM run_answers WHERE run_id = $1 ORDER BY answer_number`, [runId]);
  return result.rows;
}

/**
 * Records the operator's answer to the question the run's agent waits on, then signals it to the run's workflow,
 * which resumes the agent's session with it. 404 for an unknown run; 409 for a run that waits on no question (naming
 * its state), a question already answered, or a run whose workflow has ended; 422 for an answer that does not fit
 * the question. The same key with the same answer gets the first result (and signals it again: the workflow takes
 * each answer number once); with another answer, 409.
 */
export async function answerRun(deps: { store: Store; runs: RunLauncher }, request: AnswerRunRequest): Promise<AnswerRunResult> {
  const { store } = deps;
  if (!(await getRun(store, request.run_id))) throw new CommandRefusedError(404, `unknown run '${request.run_id}'`);
  let recorded;
  try {
    recorded = await store.transaction((tx) =>
      runIdempotent(tx, { scope: `run-answer:${request.run_id}`, key: request.idempotency_key, payload: request.answer }, () => recordAnswer(tx, request)),
    );
  } catch (error) {
    if (!(error instanceof AlreadyAnsweredError)) throw error;
    // Its first sender may have lost the answer to the signal on its way (a dropped connection, a reloaded page):
    // the recorded one goes to the run again, which takes each answer number once.
    await deliver(deps, request.run_id, error.answer);
    throw new CommandRefusedError(409, `the question of run '${request.run_id}' is already answered (answer ${error.answer.answer_number}); that answer was sent to the run again`);
  }
  await deliver(deps, request.run_id, recorded.response);
  return { ...recorded.response, replayed: recorded.replayed };
}

async function deliver(deps: { runs: RunLauncher }, runId: string, answer: { answer_number: number; prompt: string; allowed_tools: AllowedTool[] }): Promise<void> {
  const delivered = await deps.runs.deliverAnswer(runId, { answer_number: answer.answer_number, prompt: answer.prompt, allowed_tools: answer.allowed_tools });
  if (delivered === 'closed') {
    throw new CommandRefusedError(409, `run '${runId}': its workflow has ended, so the answer recorded as number ${answer.answer_number} cannot resume the agent; cancel the run, then requeue its item to start afresh`);
  }
}

/** The run's question has its answer, and the run has not resumed with it yet. */
class AlreadyAnsweredError extends Error {
  readonly answer: RecordedAnswer;

  constructor(answer: RecordedAnswer) {
    super(`answer ${answer.answer_number} is already recorded`);
    this.answer = answer;
    this.name = 'AlreadyAnsweredError';
  }
}

async function recordAnswer(tx: Queryable, request: AnswerRunRequest): Promise<Omit<AnswerRunResult, 'replayed'>> {
  const run = await getRun(tx, request.run_id, { forUpdate: true });
  if (!run) throw new CommandRefusedError(404, `unknown run '${request.run_id}'`);
  if (run.state !== 'question_pending') {
    throw new CommandRefusedError(409, `run '${run.run_id}' is ${run.state}: its agent waits on no question`);
  }
  const item = await getQueueItem(tx, run.project_id);
  if (!item || item.current_run_id !== run.run_id || item.status !== 'running') {
    throw new CommandRefusedError(409, `run '${run.run_id}' stopped waiting for an answer (its item is ${item?.status ?? 'gone'}): requeue the item to start afresh`);
  }
  // Each question the agent asked is one `question_asked` transition.
  const asked = await transitionCount(tx, run.run_id, 'question_asked');
  const answers = await listRunAnswers(tx, run.run_id);
  if (asked === 0) throw new CommandRefusedError(409, `run '${run.run_id}' asked its question before answers existed: requeue its item to start afresh`);
  if (answers.length >= asked) throw new AlreadyAnsweredError(answers.at(-1)!);
  const problem = answerProblem(run.question_detail, request.answer);
  if (problem) throw new CommandRefusedError(422, problem);

  const answerNumber = asked;
  const resume = resumeFor(run.question, run.question_detail, request.answer);
  await tx.query(
    `INSERT INTO run_answers (run_id, answer_number, question, question_detail, answer, prompt, allowed_tools, requested_by)
     VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6, $7::jsonb, $8)`,
    [run.run_id, answerNumber, run.question, run.question_detail ? JSON.stringify(run.question_detail) : null, JSON.stringify(request.answer), resume.prompt, JSON.stringify(resume.allowed_tools), request.requested_by],
  );
  await appendAuditEvent(tx, {
    entity_type: 'run',
    entity_id: run.run_id,
    event_type: 'run.answer_given',
    payload: { project_id: run.project_id, answer_number: answerNumber, answer: request.answer, allowed_tools: resume.allowed_tools },
    idempotency_key: `${run.run_id}:answer:${answerNumber}`,
    actor: request.requested_by,
    request_id: request.request_id ?? null,
  });
  return { ok: true, run_id: run.run_id, answer_number: answerNumber, prompt: resume.prompt, allowed_tools: resume.allowed_tools };
}
