// @ts-check
/**
 * A run's question and its answers on the run page: what the agent asks (a question with its choices, or a permission
 * for one tool call), the form that answers it, and the answers given so far. The agent wrote the question, so every
 * part of it is shown as text, never parsed.
 */
import { ACTOR, ApiError, api, newKey, segment } from './api.js';
import { h } from './dom.js';
import { when, words } from './format.js';
import { badge, card, facts, table, uniqueId } from './ui.js';
import { runCommand } from './ui-commands.js';
import { field } from './ui-forms.js';

/** @typedef {import('./dom.js').Child} Child */

/** The API's bounds on an answer in words and on a note with a choice or a permission decision. */
const ANSWER_MAX = 8000;
const NOTE_MAX = 2000;

const PERMISSIONS = [
  { decision: 'allow_once', label: 'Allow once' },
  { decision: 'allow_for_run', label: 'Allow for the rest of the run' },
  { decision: 'deny', label: 'Deny' },
];

/**
 * Where the run's question stands: `open` while the agent waits for an answer, `answered` once this question has its
 * answer (the session resumes), `closed` when the run no longer waits (it stopped waiting, or it asked before answers
 * existed: its item is then in needs review).
 * @param {any} answer the run detail
 * @returns {'open' | 'answered' | 'closed'}
 */
export function questionStatus(answer) {
  const run = answer.run;
  const asked = questionsAsked(run);
  const last = run.transitions.at(-1);
  if (run.state !== 'question_pending' || asked === 0 || last?.transition !== 'question_asked') return 'closed';
  return answer.answers.length >= asked ? 'answered' : 'open';
}

/** How many questions the run's agent has asked: each is a `question_asked` transition. @param {any} run */
const questionsAsked = (run) => run.transitions.filter((row) => row.transition === 'question_asked').length;

/** What was answered, in words: the text, the choice or the decision, and the note with it. @param {any} given */
function answerText(given) {
  if (given.kind === 'text') return given.text;
  const what = given.kind === 'choice' ? `Chose “${given.choice}”` : words(given.decision);
  return [what, given.note ? h('span', { class: 'hint block' }, `Note: ${given.note}`) : null];
}

/** @param {any[]} tools */
const toolsText = (tools) => (tools.length === 0 ? '—' : h('ul', { class: 'plain' }, tools.map((tool) => h('li', null, h('code', null, tool.rule), ` (${tool.scope === 'once' ? 'once' : 'for the run'})`))));

/** The answers given to the run, first first; null when there are none. @param {any[]} answers @param {HTMLElement | null} output */
export function answersCard(answers, output) {
  if (answers.length === 0) return null;
  return card(
    'Answers',
    output,
    table({
      label: 'Answers to the agent',
      empty: 'No answers.',
      rows: answers,
      columns: [
        { title: 'Number', numeric: true, cell: (row) => String(row.answer_number) },
        { title: 'Question', cell: (row) => h('span', { class: 'question-text' }, row.question ?? '—') },
        { title: 'Answer', cell: (row) => answerText(row.answer) },
        { title: 'Allowed tools', cell: (row) => toolsText(row.allowed_tools) },
        { title: 'By', cell: (row) => row.requested_by },
        { title: 'When', cell: (row) => when(row.created_at) },
      ],
    }),
  );
}

/**
 * The run page's question: its card, rebuilt only when the question or where it stands changes, so that a poll keeps
 * what the person typed; and the one outcome slot its commands write to.
 * @param {string} runId
 * @param {() => Promise<void>} refresh redraws the run page after an answer was sent (or refused)
 */
export function createRunQuestion(runId, refresh) {
  const output = h('div', { class: 'command-output answer-output' });
  /**
   * The answer being sent, its key, and the question it answers: trying the same answer to the same question again
   * after an error sends the same key (the API then gives the first try's result instead of a second answer).
   */
  let pending = /** @type {{ body: string, key: string, question: number, failedTransiently: boolean } | null} */ (null);
  /** Which of the run's questions the page shows: the number of questions asked so far. */
  let askedSoFar = 0;
  let shown = /** @type {{ fingerprint: string, el: HTMLElement } | null} */ (null);

  /**
   * Sends one answer from `button`; the form's other buttons wait meanwhile.
   * @param {HTMLButtonElement} button
   * @param {HTMLButtonElement[]} buttons
   * @param {Record<string, string>} body the answer, without the actor and the key
   */
  async function send(button, buttons, body) {
    const fingerprint = JSON.stringify(body);
    if (pending?.body !== fingerprint || pending.question !== askedSoFar) pending = { body: fingerprint, key: newKey(), question: askedSoFar, failedTransiently: false };
    const sending = pending;
    const others = buttons.filter((other) => other !== button && !other.disabled);
    for (const other of others) other.disabled = true;
    const post = async () => {
      try {
        return await api('POST', `/control/api/v1/runs/${segment(runId)}/answer`, { requested_by: ACTOR, idempotency_key: sending.key, ...body });
      } catch (error) {
        sending.failedTransiently = isTransient(error);
        throw error;
      }
    };
    await runCommand(button, output, post, {
      what: 'Sending the answer',
      progress: 'Sending the answer…',
      shown: (result) =>
        result.replayed
          ? `Answer ${result.answer_number} sent (an earlier try had recorded it): the agent's session resumes with it.`
          : `Answer ${result.answer_number} sent: the agent's session resumes with it.`,
      done: () => {
        pending = null;
      },
    });
    for (const other of others) other.disabled = false;
    // A refused answer may still have been recorded (a run whose workflow had ended): the page shows what holds now.
    await refresh();
  }

  /** @param {string} text */
  const refuse = (text) => output.replaceChildren(h('p', { class: 'error', role: 'alert' }, text));

  /** The questions with their options, one choice among them all, a note, and an answer in words. @param {any} detail */
  function questionForm(detail) {
    const group = uniqueId('choice');
    const asked = detail?.kind === 'question' ? detail.questions : [];
    const offered = asked.some((question) => question.options.length > 0);
    const note = /** @type {HTMLTextAreaElement} */ (h('textarea', { rows: 2, maxlength: NOTE_MAX, 'data-key': 'answer-note' }));
    const text = /** @type {HTMLTextAreaElement} */ (h('textarea', { rows: 4, maxlength: ANSWER_MAX, 'data-key': 'answer-text' }));
    const choose = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'primary', 'data-key': 'send-choice' }, 'Send the choice'));
    const write = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: offered ? undefined : 'primary', 'data-key': 'send-answer' }, 'Send the answer'));
    const buttons = offered ? [choose, write] : [write];
    /** @type {HTMLInputElement[]} */
    const options = [];
    const questions = asked.map((question, index) =>
      h(
        'fieldset',
        { class: 'asked' },
        h('legend', null, question.header ?? `Question ${index + 1}`),
        h('p', { class: 'question-text' }, question.question),
        question.options.length === 0
          ? null
          : h(
              'div',
              { class: 'options' },
              question.options.map((option) =>
                h(
                  'label',
                  { class: 'option' },
                  remember(options, h('input', { type: 'radio', name: group, value: option.label, 'data-key': `option-${index}-${option.label}` })),
                  h('span', null, h('strong', null, option.label), option.description ? h('span', { class: 'hint block' }, option.description) : null),
                ),
              ),
            ),
      ),
    );
    choose.addEventListener('click', () => {
      const picked = options.find((option) => option.checked);
      if (!picked) {
        refuse('Pick one of the options first.');
        return;
      }
      const noted = note.value.trim();
      void send(choose, buttons, { choice: picked.value, ...(noted ? { note: noted } : {}) });
    });
    write.addEventListener('click', () => {
      const answer = text.value.trim();
      if (!answer) {
        refuse('Write the answer first.');
        text.focus();
        return;
      }
      void send(write, buttons, { answer });
    });
    return [
      questions,
      offered ? [field('Note with the choice (optional)', note), h('div', { class: 'actions' }, choose)] : null,
      h('h4', null, offered ? 'Or answer in words' : 'Your answer'),
      field('Answer', text, `at most ${ANSWER_MAX.toLocaleString('en')} characters`),
      h('div', { class: 'actions' }, write),
    ];
  }

  /** The tool call the agent asks to make, what allowing it would do, and the three decisions. @param {any} detail @param {string | null} effect */
  function permissionForm(detail, effect) {
    const note = /** @type {HTMLTextAreaElement} */ (h('textarea', { rows: 2, maxlength: NOTE_MAX, 'data-key': 'permission-note' }));
    const buttons = PERMISSIONS.map(({ decision, label }) =>
      /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: decision === 'deny' ? 'danger' : undefined, 'data-key': `permission-${decision}` }, label)),
    );
    buttons.forEach((button, index) =>
      button.addEventListener('click', () => {
        const noted = note.value.trim();
        void send(button, buttons, { permission: PERMISSIONS[index]?.decision ?? 'deny', ...(noted ? { note: noted } : {}) });
      }),
    );
    return [
      permissionFacts(detail, effect),
      field('Note for the agent (optional)', note),
      h('div', { class: 'actions' }, buttons),
    ];
  }

  /**
   * The card for the run's question (null when it has none), the same element while nothing about it changed.
   * @param {any} answer the run detail
   */
  function questionCard(answer) {
    const run = answer.run;
    const detail = run.question_detail;
    if (!run.question && !detail) return null;
    const status = questionStatus(answer);
    askedSoFar = questionsAsked(run);
    if (pending && pending.question !== askedSoFar) pending = null;
    const fingerprint = JSON.stringify([run.question, detail, answer.permission_effect, status, answer.answers.length, status === 'answered' && canRetry()]);
    if (shown?.fingerprint !== fingerprint) shown = { fingerprint, el: buildCard(answer, status) };
    return shown.el;
  }

  /** @param {any} answer @param {'open' | 'answered' | 'closed'} status */
  function buildCard(answer, status) {
    const run = answer.run;
    const detail = run.question_detail;
    // The text the gate recorded repeats the questions of a detailed one; it stands alone for a question without detail.
    const text = detail ? null : h('p', { class: 'question-text' }, run.question);
    const latest = answer.answers.at(-1);
    const standing = {
      open: h('p', null, badge('question_pending', 'waiting for an answer'), ' The agent waits: its session resumes with your answer.'),
      answered: h('p', null, badge('running', 'answered'), ` Answer ${latest?.answer_number ?? ''} was recorded: the run's workflow resumes the agent's session with it.`),
      closed: h('p', { class: 'muted' }, run.state === 'question_pending' ? 'The run no longer waits for an answer: requeue its item to start afresh.' : `The run is ${words(run.state)}: the agent no longer waits for an answer.`),
    }[status];
    /** @type {Child} */
    let body;
    if (status !== 'open') body = detail?.kind === 'permission' ? permissionFacts(detail, answer.permission_effect) : detail ? questionsAsText(detail) : null;
    else body = detail?.kind === 'permission' ? permissionForm(detail, answer.permission_effect) : questionForm(detail);
    return card('Question', standing, text, body, status === 'answered' && canRetry() ? retryAction() : null, output);
  }

  /** Whether the last try failed where the same answer may yet go through: no answer came, or the server failed. */
  const canRetry = () => pending?.failedTransiently === true;

  /**
   * After a try that failed once the answer was recorded (its workflow could not be told), the same answer again with
   * the same key: the API answers the recorded answer and tells the workflow again.
   */
  function retryAction() {
    const failed = pending;
    if (!failed) return null;
    const again = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'primary', 'data-key': 'send-again' }, 'Send the answer again'));
    again.addEventListener('click', () => void send(again, [again], JSON.parse(failed.body)));
    return h('div', { class: 'actions' }, again);
  }

  return { questionCard, output };
}

/** An error after which the same call may yet succeed: no answer at all, or a server error (a refusal would repeat). */
const isTransient = (/** @type {unknown} */ error) => !(error instanceof ApiError) || error.status === 0 || error.status >= 500;

/** Keeps `input` in `list` and gives it back, to build a control and collect it at once. @param {HTMLInputElement[]} list @param {HTMLElement} input */
function remember(list, input) {
  list.push(/** @type {HTMLInputElement} */ (input));
  return input;
}

/** @param {any} detail @param {string | null} effect */
function permissionFacts(detail, effect) {
  return facts([
    ['Tool', h('code', null, detail.tool_name)],
    ['Arguments', h('pre', { class: 'tool-input', tabindex: 0, 'aria-label': 'The tool call\'s arguments' }, h('code', null, JSON.stringify(detail.tool_input, null, 2)))],
    ['If allowed, it', effect ?? '—'],
  ]);
}

/** A question that no longer takes an answer: its text and options, read only. @param {any} detail */
function questionsAsText(detail) {
  return detail.questions.map((question, index) =>
    h(
      'div',
      { class: 'asked' },
      h('h4', null, question.header ?? `Question ${index + 1}`),
      h('p', { class: 'question-text' }, question.question),
      question.options.length === 0 ? null : h('ul', { class: 'plain' }, question.options.map((option) => h('li', null, h('strong', null, option.label), option.description ? ` — ${option.description}` : null))),
    ),
  );
}
