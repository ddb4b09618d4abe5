// @ts-check
/** Overview: the five operator lanes, why nothing moves, what needs a person first, automation readiness, and the health of every part. */
import { api, segment, withQuery } from './api.js';
import { h, Region } from './dom.js';
import { count, words } from './format.js';
import { age, badge, card, empty, externalLink, facts, fill, link, table } from './ui.js';
import { runCommand } from './ui-commands.js';
import { whyView } from './why-view.js';

/** @typedef {import('./app.js').PanelContext} PanelContext */

const READINESS_EVERY_MS = 60_000;

/** The canonical lanes, what each holds, and where an operator acts on it. */
const LANES = [
  { id: 'attention', title: 'Attention', holds: 'blocked, questions, dispatch errors, flagged items, papers whose checklist failed', route: '#/queue/blocked' },
  { id: 'running', title: 'Running', holds: 'items in flight on a worker', route: '#/runs' },
  { id: 'write', title: 'Write', holds: 'completed runs waiting for their first draft', route: '#/papers' },
  { id: 'publish', title: 'Publish', holds: 'finalized papers waiting for their corpus import', route: '#/papers' },
  { id: 'imported', title: 'Imported', holds: 'papers recorded in a corpus', route: '#/papers' },
];

function laneCards(overview) {
  return h(
    'ul',
    { class: 'lane-cards' },
    LANES.map((lane) =>
      h(
        'li',
        { class: ['lane-card', lane.id === 'attention' && overview.operator_counts.attention > 0 ? 'alert' : ''] },
        h('a', { href: lane.route, 'data-key': `lane-${lane.id}` }, h('span', { class: 'lane-count' }, count(overview.operator_counts[lane.id])), h('span', { class: 'lane-title' }, lane.title)),
        h('span', { class: 'hint' }, lane.holds),
      ),
    ),
  );
}

/** An agent's question its run still waits on: the item stays in flight (one left unanswered too long is in needs review). */
const waitsForAnswer = (item) => item.reason === 'agent_question' && item.status !== 'needs_review';

/** Where an actionable item is acted on: a paper's page, or the item's run and its queue row. */
function actionableTarget(item) {
  if (item.kind === 'paper') return link(`#/papers/${segment(item.paper_id)}`, item.title ?? item.paper_id);
  return h(
    'span',
    null,
    link(`#/queue/blocked/${segment(item.project_id)}`, item.project_name),
    item.current_run_id ? [' · ', link(`#/runs/${segment(item.current_run_id)}`, waitsForAnswer(item) ? 'answer the agent on its run' : 'run')] : null,
    item.question ? h('span', { class: 'hint block' }, 'The agent asks: ', item.question) : null,
    item.last_error ? h('span', { class: 'hint block' }, item.last_error) : null,
  );
}

function actionableTable(overview) {
  return table({
    label: 'What needs a person',
    empty: 'Nothing needs a person right now.',
    rows: overview.actionable_items,
    columns: [
      { title: 'Why', cell: (item) => badge(item.reason === 'paper_import' ? 'ok' : 'blocked', words(item.reason)) },
      { title: 'Item', cell: actionableTarget },
      { title: 'What to do', cell: (item) => item.hint },
      { title: 'Waiting since', cell: (item) => age(item.since) },
    ],
  });
}

/** @param {any} readiness @param {{ open: boolean }} criteria whether the criteria are unfolded (kept across redraws) */
function readinessView(readiness, criteria) {
  const first = readiness.first_failing;
  const details = h(
    'details',
    { open: criteria.open },
    h('summary', { 'data-key': 'readiness-criteria' }, `All ${readiness.criteria.length} criteria`),
      table({
        label: 'Readiness criteria',
        empty: 'No criteria.',
        rows: readiness.criteria,
        columns: [
          { title: 'Criterion', cell: (row) => words(row.criterion) },
          { title: 'Result', cell: (row) => badge(row.ok ? 'pass' : 'fail', row.ok ? 'pass' : row.checked ? 'fail' : 'not checked') },
          { title: 'Detail', cell: (row) => row.detail },
        ],
      }),
  );
  details.addEventListener('toggle', () => {
    criteria.open = /** @type {HTMLDetailsElement} */ (details).open;
  });
  return [h('p', { class: 'verdict' }, badge(readiness.status), ' ', first ? [h('strong', null, words(first.criterion)), ': ', first.detail] : 'every criterion passes'), details];
}

function healthView({ health, queueHealth }) {
  const temporal = health.temporal;
  return [
    facts([
      ['Store', [badge(health.store.ok ? 'ok' : 'error', health.store.ok ? 'ok' : 'down'), ' ', health.store_backend, health.store.error ? ` — ${health.store.error}` : '']],
      [
        'Temporal',
        temporal
          ? [
              badge(temporal.ok ? 'ok' : 'error', temporal.ok ? 'ok' : 'unreachable'),
              ` ${temporal.address} (${temporal.namespace}), worker ${words(temporal.worker_state)}`,
              temporal.ui_url ? [' · ', externalLink(temporal.ui_url, 'Temporal UI')] : null,
              temporal.error ? ` — ${temporal.error}` : '',
            ]
          : 'not connected',
      ],
      // The worker gate this process also serves: what its agents can see, and the user they run as.
      ...(health.worker_gate
        ? [/** @type {[string, import('./dom.js').Child]} */ (['Agents', [badge(health.worker_gate.agent_isolation.sandboxed ? 'ok' : 'error', words(health.worker_gate.agent_isolation.mode)), ' ', health.worker_gate.agent_isolation.summary]])]
        : []),
    ]),
    table({
      label: 'Workers',
      empty: 'No worker targets are configured.',
      rows: queueHealth.workers,
      columns: [
        { title: 'Worker', cell: (worker) => [h('strong', null, worker.name), h('span', { class: 'hint block' }, `${words(worker.role)} · ${worker.wake_gate_url}`)] },
        { title: 'Fresh', cell: (worker) => badge(worker.fresh ? 'ok' : 'blocked', worker.fresh ? 'fresh' : 'stale') },
        { title: 'Last preflight', cell: (worker) => (worker.observation ? [badge(worker.observation.ok ? 'ok' : 'fail', worker.observation.ok ? 'ready' : 'not ready'), ' ', worker.observation.summary, ' · ', age(worker.observation.observed_at)] : 'never') },
      ],
    }),
  ];
}

function eventsView(overview) {
  return [
    table({
      label: 'Recent events',
      empty: 'No events yet.',
      rows: overview.recent_events,
      columns: [
        { title: 'When', cell: (event) => age(event.created_at) },
        { title: 'Event', cell: (event) => event.event_type },
        { title: 'Entity', cell: (event) => `${event.entity_type} ${event.entity_id}` },
        { title: 'By', cell: (event) => event.actor ?? '—' },
      ],
    }),
    h('p', null, link('#/events', 'All events')),
  ];
}

/** @param {PanelContext} _context */
export function createOverviewPanel(_context) {
  const lanes = new Region();
  const actionable = new Region();
  const why = new Region();
  const readiness = new Region();
  const health = new Region();
  const events = new Region();
  const workerCheck = h('div');
  const criteria = { open: false };
  // Readiness asks the research provider's quota endpoint (when one is configured), so it is read once a minute.
  let readinessReadAt = 0;
  /** Readiness without its check time, which changes on every read and would redraw the region each time. */
  const readReadiness = async (query = {}) => {
    const { checked_at: _checkedAt, ...readiness } = await api('GET', withQuery('/control/api/v1/automation-readiness', query));
    readinessReadAt = Date.now();
    return readiness;
  };
  const checkButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button' }, 'Check the workers now'));
  checkButton.addEventListener('click', () =>
    runCommand(checkButton, workerCheck, () => fill(readiness, 'Reading automation readiness', () => readReadiness({ refresh_worker: true }), (answer) => readinessView(answer, criteria)), {
      what: 'The worker check',
      progress: 'Preflighting every worker…',
      shown: (answer) => (answer ? `Checked: ${answer.status}.` : 'Checked.'),
      done: () => void refresh(),
    }),
  );

  const el = h(
    'div',
    { class: 'panel' },
    h('h2', null, 'Overview'),
    card('Operator lanes', lanes.el),
    card('Why nothing moves', why.el),
    h(
      'div',
      { class: 'columns' },
      card('Automation readiness', readiness.el, h('div', { class: 'actions' }, checkButton), workerCheck),
      card('Health', health.el),
    ),
    card('What needs a person', actionable.el),
    card('Recent events', events.el),
  );

  async function readHealth() {
    const [healthAnswer, queueHealth] = await Promise.all([
      api('GET', '/control/health', undefined, { acceptStatus: [503] }),
      api('GET', '/control/api/queue-health'),
    ]);
    // Only what is shown: the answers' own timestamps and ages change on every read.
    const { timestamp: _timestamp, ...health } = healthAnswer;
    const workers = queueHealth.workers.map(({ age_sec: _age, ...worker }) => worker);
    return { health, queueHealth: { workers } };
  }

  async function refresh() {
    await Promise.all([
      fill(lanes, 'Reading the overview', () => api('GET', withQuery('/control/api/v1/overview', { active_limit: 10, event_limit: 10 })), laneCards).then((overview) => {
        const unavailable = () => empty('Unavailable while the overview cannot be read.');
        actionable.show(overview?.actionable_items ?? null, () => (overview ? actionableTable(overview) : unavailable()));
        events.show(overview?.recent_events ?? null, () => (overview ? eventsView(overview) : unavailable()));
      }),
      Date.now() - readinessReadAt < READINESS_EVERY_MS ? null : fill(readiness, 'Reading automation readiness', () => readReadiness(), (answer) => readinessView(answer, criteria)),
      fill(health, 'Reading health', readHealth, healthView),
      // Without its check time, which changes on every read and would redraw the region each time.
      fill(why, 'Reading why nothing moves', () => api('GET', '/control/api/v1/why').then(({ checked_at: _checkedAt, ...answer }) => answer), whyView),
    ]);
  }

  return { el, refresh };
}
