// @ts-check
/** Lanes and runs: each worker lane with the run in flight, the run list, and one run's whole story. */
import { ACTOR, api, segment, withQuery } from './api.js';
import { h, Region } from './dom.js';
import { compactJson, count, duration, when, words } from './format.js';
import { age, badge, card, CursorPager, empty, externalLink, facts, fill, fillPage, jsonDetails, link, table } from './ui.js';
import { confirmCommand } from './ui-commands.js';
import { filterBar } from './ui-forms.js';
import { answersCard, createRunQuestion } from './run-questions.js';
import { createRunFiles } from './run-files.js';
import { createRunTranscript } from './run-transcript.js';
import { createUsageLimit } from './run-usage-limit.js';

/** The agent's token usage as the worker reported it: the total, and on the detail its input and output. */
function tokens(usage, { detailed = false } = {}) {
  if (!usage) return '—';
  return detailed ? `${count(usage.total_tokens)} (${count(usage.input_tokens)} in, ${count(usage.output_tokens)} out)` : count(usage.total_tokens);
}

/** Why the run ended, as the worker told it: the kind, then the model's status, the signal or exit, reaped processes. */
function causeLine(cause) {
  if (!cause) return '—';
  const parts = [words(cause.kind)];
  if (cause.model_status !== undefined) parts.push(`model answered ${cause.model_status}`);
  if (cause.signal) parts.push(cause.signal);
  else if (cause.exit_code !== undefined) parts.push(`exit ${cause.exit_code}`);
  if (cause.reaped?.length) parts.push(`${count(cause.reaped.length)} reaped`);
  return parts.join(' · ');
}

/** The cause in full on the run page: its line, the worker's message, and the processes it reaped. */
function causeView(cause) {
  if (!cause) return '—';
  return [
    h('span', null, causeLine(cause)),
    cause.message ? h('span', { class: 'hint block' }, cause.message) : null,
    cause.reaped?.length ? h('ul', { class: 'plain' }, cause.reaped.map((proc) => h('li', null, `${proc.pid} ${words(proc.outcome)}: `, h('code', null, proc.command)))) : null,
  ];
}

/** @typedef {import('./app.js').PanelContext} PanelContext */

const RUN_STATES = ['prepared', 'dispatching', 'awaiting_wake', 'running', 'question_pending', 'usage_limited', 'wake_ready', 'session_finished_ready', 'gate_timeout', 'gate_error', 'reconciled', 'dispatch_error', 'canceled'];
/** @type {[string, string][]} */
const SORTS = [
  ['-created_at', 'Newest'],
  ['created_at', 'Oldest'],
  ['-updated_at', 'Recently updated'],
  ['updated_at', 'Longest unchanged'],
];

const runLink = (runId) => link(`#/runs/${segment(runId)}`, runId);

/**
 * The gate's quiet window for a run in flight: its progress (quiet samples of those needed), why it still waits, how
 * long, and, past three times the window, that a person is needed. '—' before the gate judges it.
 */
function quietWindowView(window) {
  if (!window) return '—';
  const progress = `quiet ${window.samples_in_window}/${window.samples_needed}`;
  const waited = window.waiting_sec === null ? '' : ` · waiting for ${duration(window.waiting_sec)}`;
  return h(
    'span',
    { class: 'quiet-window' },
    badge(window.overdue ? 'blocked' : window.verdict ?? 'pending', window.overdue ? 'needs a person' : words(window.verdict ?? 'pending')),
    ` ${progress}${waited}`,
    window.reasons.length > 0 ? h('span', { class: 'hint block' }, window.reasons.join('; ')) : null,
  );
}

/** Which GPUs a run was placed on: the indices, 'none' when it sees none, '—' when it was not pinned. */
function gpusText(gpuIndices) {
  if (gpuIndices === null || gpuIndices === undefined) return '—';
  return gpuIndices.length === 0 ? 'none' : gpuIndices.join(', ');
}

function laneCard(lane) {
  const active = lane.active;
  const callback = active?.last_callback;
  const route = lane.route;
  const slot = route && route.lane !== route.machine_target ? ` · slot ${route.slot} of ${route.machine_target}` : '';
  return h(
    'li',
    { class: 'lane' },
    h('h4', null, lane.lane, ' ', badge(lane.idle ? 'quiet' : 'running', lane.idle ? 'idle' : 'busy'), lane.configured ? null : [' ', badge('blocked', 'not configured')]),
    route ? h('p', { class: 'hint' }, `${words(route.worker_role)} · ${route.wake_gate_url ?? 'no gate URL'}${slot}`) : null,
    active
      ? facts([
          ['In flight', [h('strong', null, active.item.project_name), ' ', badge(active.item.status)]],
          ['Run', active.run ? [runLink(active.run.run_id), ' ', badge(active.run.state), ' · started ', age(active.run.created_at)] : '—'],
          ['GPUs', gpusText(active.run?.gpu_indices)],
          ['Gate state', callback?.gate_state ? badge(callback.gate_state) : '—'],
          ['Quiet window', quietWindowView(active.run?.quiet_window ?? null)],
          ['Last callback', callback ? [words(callback.event_type), ' · ', age(callback.received_at)] : 'none yet'],
        ])
      : h('p', { class: 'muted' }, 'Nothing in flight.'),
    facts([
      ['Next', lane.next_candidate ? lane.next_candidate.project_name : 'nothing eligible'],
      ['Eligible queued', count(lane.counts.eligible_queued)],
    ]),
  );
}

function lanesView(answer) {
  return [
    answer.lanes.length === 0 ? empty('No worker lanes are configured.') : h('ul', { class: 'lanes' }, answer.lanes.map(laneCard)),
    answer.truncated ? h('p', { class: 'hint' }, 'More lanes exist than are shown.') : null,
  ];
}

function createRunList() {
  const state = { state: '', search: '', sort: '-created_at' };
  const pager = new CursorPager(() => void refreshList());
  const lanes = new Region();
  const list = new Region();

  const filters = filterBar(
    state,
    [
      { name: 'state', label: 'State', values: RUN_STATES, blank: 'any state' },
      { name: 'search', label: 'Search', search: 'run, project, lane, decision, error…' },
      { name: 'sort', label: 'Sort', options: SORTS },
    ],
    () => pager.restart(),
  );

  const el = h(
    'div',
    { class: 'panel' },
    h('h2', null, 'Lanes and runs'),
    card('Lanes', lanes.el),
    card('Runs', filters, list.el),
  );

  async function refreshList() {
    await fillPage(list, pager, {
      what: 'Reading the runs',
      read: () => api('GET', withQuery('/control/api/v1/runs', { ...state, cursor: pager.cursor, page_size: 25 })),
      pages: 'Run pages',
      drawnWith: state,
      table: {
        label: 'Runs',
        empty: state.state || state.search ? 'No run matches these filters.' : 'No runs yet: dispatch an item from the Queue panel.',
        columns: [
          { title: 'Run', cell: (run) => runLink(run.run_id) },
          { title: 'Project', cell: (run) => run.project_id },
          { title: 'State', cell: (run) => badge(run.state) },
          { title: 'Lane', cell: (run) => run.lane },
          { title: 'Decision', cell: (run) => (run.decision ? badge(run.decision) : '—') },
          { title: 'Paper', cell: (run) => (run.paper_status ? words(run.paper_status) : '—') },
          { title: 'Tokens', cell: (run) => tokens(run.token_usage) },
          { title: 'Cause', cell: (run) => causeLine(run.cause) },
          { title: 'Started', cell: (run) => age(run.created_at) },
          { title: 'Finished', cell: (run) => age(run.finished_at) },
        ],
      },
    });
  }

  async function refresh() {
    await Promise.all([fill(lanes, 'Reading the lanes', () => api('GET', '/control/api/v1/lanes'), lanesView), refreshList()]);
  }
  return { el, refresh };
}

function evidenceView(evidence) {
  if (!evidence) return empty('The worker has reported no evidence yet.');
  const files = Array.isArray(evidence.files) ? evidence.files : null;
  return [
    facts(
      Object.entries(evidence)
        .filter(([, value]) => value === null || typeof value !== 'object')
        .map(([name, value]) => [words(name), String(value ?? '—')]),
    ),
    files ? h('ul', { class: 'plain' }, files.map((file) => h('li', null, h('code', null, String(file))))) : null,
    jsonDetails('Evidence as reported', evidence),
  ];
}

/** @param {string} runId */
function createRunDetail(runId) {
  const detail = new Region();
  const cancelOutput = h('div', { class: 'command-output' });
  const cancelHolder = h('div', { class: 'actions' });
  let cancelShown = false;
  // After an answer the page is drawn again even when the run reads the same (a replayed answer records nothing new).
  const question = createRunQuestion(runId, () => {
    detail.invalidate();
    return refresh();
  });
  const usageLimit = createUsageLimit(runId, () => {
    detail.invalidate();
    return refresh();
  });
  const files = createRunFiles(runId);
  const transcript = createRunTranscript(runId);
  const el = h('div', { class: 'panel' }, h('p', null, link('#/runs', '← Lanes and runs')), h('h2', null, 'Run ', h('code', null, runId)), cancelHolder, cancelOutput, detail.el, transcript.el);

  function showCancel(finished) {
    if (finished) {
      cancelHolder.replaceChildren();
      cancelShown = false;
      return;
    }
    if (cancelShown) return;
    cancelShown = true;
    cancelHolder.replaceChildren(
      confirmCommand({
        label: 'Cancel this run…',
        confirmLabel: 'Yes, cancel the run',
        question: 'The agent is stopped and the queue item canceled.',
        output: cancelOutput,
        what: 'Canceling the run',
        action: () => api('POST', `/control/api/runs/${segment(runId)}/cancel`, { requested_by: ACTOR }),
        shown: (answer) => (answer.cancel_requested ? 'Cancellation requested; the workflow records it shortly.' : answer.already_finished ? `The run had already finished (${words(answer.state)}).` : `Canceled: the run is ${words(answer.state)}.`),
        done: () => void refresh(),
      }),
    );
  }

  function draw(answer) {
    const run = answer.run;
    const project = answer.project;
    const asked = question.questionCard(answer);
    return [
      card('Run', facts([
        ['State', badge(run.state)],
        ['Project', project ? [h('strong', null, project.project_name), ' ', link(`#/queue/all/${segment(run.project_id)}`, run.project_id)] : run.project_id],
        ['Lane', `${run.lane} · ${words(run.workload_class)}`],
        ['Requested by', run.requested_by],
        ['Tokens', tokens(run.token_usage, { detailed: true })],
        ['Ended by', causeView(run.cause)],
        ['Quiet window', quietWindowView(answer.quiet_window ?? null)],
        ['Started', when(run.created_at)],
        ['Finished', when(run.finished_at)],
        ['Workflow', [h('code', null, answer.temporal.workflow_id), answer.temporal.ui_url ? [' · ', externalLink(answer.temporal.ui_url, 'Open in the Temporal UI')] : null]],
      ])),
      asked,
      usageLimit.usageLimitCard(answer),
      answersCard(answer.answers, asked ? null : question.output),
      run.last_error ? h('p', { class: 'error-text' }, run.last_error) : null,
      h(
        'div',
        { class: 'columns' },
        card('Decision', run.decision ? [h('p', null, badge(run.decision)), run.decision_summary ? h('blockquote', null, run.decision_summary) : null] : empty('No decision yet: the agent writes it when it finishes.')),
        card('Evidence', evidenceView(run.evidence)),
      ),
      // The same card on every redraw: what it shows is read apart from the run, when asked.
      files.el,
      card(
        'Transitions',
        table({
          label: 'Transitions',
          empty: 'No transitions recorded.',
          rows: run.transitions,
          columns: [
            { title: 'Transition', cell: (row) => words(row.transition) },
            { title: 'State', cell: (row) => [row.from_state ? [words(row.from_state), ' → '] : null, badge(row.to_state)] },
            { title: 'Queue item', cell: (row) => words(row.queue_status) },
            { title: 'At', cell: (row) => when(row.created_at) },
          ],
        }),
      ),
      card(
        'Callbacks from the worker',
        table({
          label: 'Worker callbacks',
          empty: 'No callback from the worker yet.',
          rows: answer.callbacks ?? [],
          columns: [
            { title: 'Event', cell: (row) => words(row.event_type) },
            { title: 'Gate state', cell: (row) => (row.gate_state ? badge(row.gate_state) : '—') },
            { title: 'Reason', cell: (row) => row.reason ?? '—' },
            { title: 'Received', cell: (row) => [age(row.received_at), row.ignored ? [' ', badge('quiet', `ignored: ${row.ignore_reason ?? ''}`)] : null] },
          ],
        }),
      ),
      card(
        'Papers',
        table({
          label: 'Papers of this run',
          empty: 'No paper yet.',
          rows: answer.papers,
          columns: [
            { title: 'Paper', cell: (paper) => link(`#/papers/${segment(paper.paper_id)}`, paper.title ?? paper.paper_id) },
            { title: 'Stage', cell: (paper) => badge(paper.stage) },
            { title: 'Review', cell: (paper) => badge(paper.review_status) },
          ],
        }),
      ),
      card(
        'Events',
        table({
          label: 'Events of this run',
          empty: 'No events.',
          rows: answer.events,
          columns: [
            { title: 'When', cell: (event) => when(event.created_at) },
            { title: 'Event', cell: (event) => event.event_type },
            { title: 'By', cell: (event) => event.actor ?? '—' },
            { title: 'Payload', cell: (event) => h('code', { class: 'payload' }, compactJson(event.payload)) },
          ],
        }),
      ),
    ];
  }

  async function refresh() {
    transcript.open();
    const answer = await fill(detail, 'Reading the run', () => api('GET', withQuery(`/control/api/v1/runs/${segment(runId)}`, { event_limit: 50 })), draw);
    if (answer) showCancel(answer.finished);
  }
  return { el, refresh };
}

/** @param {PanelContext} context */
export function createRunsPanel(context) {
  const [runId] = context.params;
  return runId ? createRunDetail(runId) : createRunList();
}
