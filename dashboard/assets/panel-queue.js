// @ts-check
/** Queue: its groups as tabs, search, sort and cursor paging; pause and resume; park and requeue; dispatch the next item or a chosen one. */
import { ACTOR, api, segment, withQuery } from './api.js';
import { h, Region } from './dom.js';
import { count, words } from './format.js';
import { age, badge, card, CursorPager, facts, fill, fillPage, labelTabPanel, link, table, tabs, uniqueId } from './ui.js';
import { DryRunCommand, runCommand } from './ui-commands.js';
import { field, filterBar } from './ui-forms.js';

/** @typedef {import('./app.js').PanelContext} PanelContext */

const GROUPS = ['active', 'queued', 'blocked', 'paused', 'completed', 'all'];
const STATUSES = ['queued', 'dispatching', 'running', 'awaiting_wake', 'wake_received', 'reconciling', 'completed', 'paused', 'canceled', 'dispatch_error', 'blocked', 'needs_review', 'usage_limited'];
/** @type {[string, string][]} */
const SORTS = [
  ['dispatch', 'Dispatch order'],
  ['-updated_at', 'Recently updated'],
  ['updated_at', 'Longest unchanged'],
  ['-created_at', 'Newest'],
  ['project_id', 'Project id'],
];
const LIVE_DISPATCH_OFF = 'Live dispatch is off: set "live_dispatch_enabled": true in the configuration and restart the control plane.';

/** The dispatch-next answer a person needs before going live: what, where, and whether the worker is ready. */
export function dispatchPreview(answer) {
  const candidate = answer.candidate;
  const route = answer.dispatch_route;
  return [
    h('p', null, badge(answer.action), ' ', answer.reason),
    facts([
      ...(candidate
        ? /** @type {[string, any][]} */ ([
            ['Candidate', [h('strong', null, candidate.project_name), ` (${candidate.project_id})`]],
            ['Workload', words(candidate.workload_class)],
            ['Priority, rank', `${candidate.dispatch_priority}, ${candidate.selection_rank}`],
            ['Earlier dispatch failures', count(candidate.dispatch_failures)],
          ])
        : []),
      ...(route
        ? /** @type {[string, any][]} */ ([
            ['Route', `${route.machine_target}${route.lane !== route.machine_target ? `, slot ${route.slot}` : ''} (${words(route.worker_role)})`],
            ['Worker gate', route.wake_gate_url ?? '—'],
            ['Worker token', route.token_configured ? 'configured' : 'missing'],
          ])
        : []),
      ...(answer.placement ? /** @type {[string, any][]} */ ([['Placement', answer.placement.reason]]) : []),
      ...(answer.agent ? /** @type {[string, any][]} */ ([['Agent', `mode ${answer.agent.mode}, model ${answer.agent.model || 'default'}, effort ${answer.agent.reasoning_effort}, sandbox ${answer.agent.sandbox || 'default'}`]]) : []),
    ]),
    answer.preflight ? preflightView(answer.preflight) : null,
  ];
}

export function preflightView(preflight) {
  return h(
    'div',
    { class: 'preflight' },
    h('p', null, h('strong', null, 'Preflight: '), badge(preflight.ok ? 'pass' : 'fail', preflight.ok ? 'ready' : 'not ready'), ' ', preflight.summary),
    table({
      label: 'Preflight checks',
      empty: 'No checks ran.',
      rows: preflight.checks ?? [],
      columns: [
        { title: 'Check', cell: (check) => words(check.name) },
        { title: 'Result', cell: (check) => badge(check.ok ? 'pass' : 'fail', check.ok ? 'pass' : 'fail') },
        { title: 'Detail', cell: (check) => check.detail },
      ],
    }),
  );
}

function dispatchResult(answer) {
  return [
    h('p', null, badge(answer.action), ' ', answer.reason),
    answer.run_id ? h('p', null, 'Run ', link(`#/runs/${segment(answer.run_id)}`, answer.run_id), ` (workflow ${answer.workflow_id})`) : null,
    answer.preflight && !answer.preflight.ok ? preflightView(answer.preflight) : null,
  ];
}

/** @param {PanelContext} context */
export function createQueuePanel(context) {
  const [routeGroup, routeSearch] = context.params;
  const state = {
    group: GROUPS.includes(routeGroup ?? '') ? /** @type {string} */ (routeGroup) : 'queued',
    search: routeSearch ?? '',
    status: '',
    sort: 'dispatch',
    /** @type {{ queue_paused: boolean, maintenance_mode: boolean, live_dispatch_enabled: boolean } | null} */
    flags: null,
  };
  const pager = new CursorPager(() => void refreshList());
  const panelId = uniqueId('queue-tab');
  const tabsRegion = new Region();
  const list = new Region('div', { id: panelId, role: 'tabpanel' });
  const flagsRegion = new Region();
  const commandOutput = h('div', { class: 'command-output' });

  // Parking an item needs a reason: one form below the toolbar, filled from the row's button.
  const parkReason = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 2000 }));
  const parkTarget = h('strong');
  const parkButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'primary' }, 'Park it'));
  const parkForm = h(
    'div',
    { class: 'inline-form', hidden: true },
    h('p', null, 'Park ', parkTarget, ': it leaves the queue until it is requeued.'),
    field('Reason', parkReason),
    h('div', { class: 'actions' }, parkButton, h('button', { type: 'button', onClick: () => closePark() }, 'Cancel')),
  );
  /** @type {any} */
  let parking = null;
  const openPark = (item) => {
    parking = item;
    parkTarget.textContent = item.project_name;
    parkReason.value = '';
    parkForm.hidden = false;
    parkReason.focus();
  };
  const closePark = () => {
    const item = parking;
    parking = null;
    parkForm.hidden = true;
    // Back to where the person was: the row's button, or the list when the row has gone.
    const again = item ? list.el.querySelector(`[data-key="park-${CSS.escape(item.project_id)}"]`) : null;
    const target = again ?? list.el.querySelector('.table-wrap');
    if (target instanceof HTMLElement) target.focus();
  };
  parkButton.addEventListener('click', () => {
    const item = parking;
    if (!item) return;
    const reason = parkReason.value.trim();
    if (!reason) {
      commandOutput.replaceChildren(h('p', { class: 'error', role: 'alert' }, 'Say why the item is parked.'));
      parkReason.focus();
      return;
    }
    void runCommand(parkButton, commandOutput, () => api('POST', '/control/queue/mark-paused', { project_id: item.project_id, reason, updated_by: ACTOR }), {
      what: `Parking ${item.project_id}`,
      shown: (answer) => `${answer.queue_item.project_name} is ${words(answer.queue_item.status)}.`,
      done: () => {
        closePark();
        void refresh();
      },
    });
  });

  const requeue = (button, item) =>
    runCommand(button, commandOutput, () => api('POST', '/control/queue/requeue', { project_id: item.project_id, requested_by: ACTOR }), {
      what: `Requeueing ${item.project_id}`,
      shown: (answer) => `${answer.queue_item.project_name} is ${words(answer.queue_item.status)} again.`,
      done: () => void refresh(),
    });

  function rowActions(item) {
    const actions = item.operator_actions ?? [];
    return h(
      'span',
      { class: 'row-actions' },
      actions.includes('requeue')
        ? h('button', { type: 'button', 'data-key': `requeue-${item.project_id}`, onClick: (event) => requeue(event.currentTarget, item) }, 'Requeue')
        : null,
      actions.includes('mark_paused') ? h('button', { type: 'button', 'data-key': `park-${item.project_id}`, onClick: () => openPark(item) }, 'Park…') : null,
      actions.includes('dispatch')
        ? h('button', { type: 'button', 'data-key': `dispatch-${item.project_id}`, onClick: () => void chooseForDispatch(item) }, 'Dispatch…')
        : null,
    );
  }

  /** The queue table as the filters stand. */
  const itemsTable = () => ({
    label: `Queue items: ${state.group}`,
    empty: state.search || state.status ? 'No item matches these filters.' : `No ${state.group === 'all' ? '' : `${state.group} `}items.`,
    columns: [
      { title: 'Project', cell: (item) => [h('strong', null, item.project_name), h('span', { class: 'hint block' }, item.project_id)] },
      { title: 'Status', cell: (item) => [badge(item.status), item.manual_review_required ? [' ', badge('blocked', 'flagged')] : null] },
      { title: 'Lane', cell: (item) => [item.lane ?? item.machine_target ?? '—', h('span', { class: 'hint block' }, words(item.workload_class))] },
      { title: 'Priority', numeric: true, cell: (item) => `${item.dispatch_priority} / ${item.selection_rank}` },
      { title: 'Last run', cell: (item) => (item.current_run_id ? [link(`#/runs/${segment(item.current_run_id)}`, item.current_run_id), h('span', { class: 'hint block' }, words(item.last_run_state))] : '—') },
      { title: 'Note', cell: (item) => [item.last_error ? h('span', { class: 'error-text' }, item.last_error) : null, item.next_action_hint ? h('span', { class: 'hint block' }, item.next_action_hint) : null] },
      { title: 'Updated', cell: (item) => age(item.updated_at) },
      { title: 'Actions', cell: rowActions },
    ],
  });

  // Blank: the next item in dispatch order. A queued row's Dispatch button fills it in and runs the dry run.
  const dispatchProject = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 200, autocomplete: 'off', spellcheck: 'false' }));
  const dispatch = new DryRunCommand({
    title: 'Dispatch an item',
    description: 'The dry run shows which item would go to which worker and runs the worker preflight; nothing is dispatched. The live call dispatches the item the dry run showed.',
    fields: [field('Project id', dispatchProject, 'Blank: the next item in dispatch order.')],
    read: () => {
      const projectId = dispatchProject.value.trim();
      return projectId ? { project_id: projectId } : {};
    },
    dryRun: (input) => api('POST', '/control/dispatch-next', { dry_run: true, requested_by: ACTOR, force_preflight: true, ...input }),
    preview: dispatchPreview,
    liveLabel: 'Dispatch it live',
    blocked: (preview) => {
      if (!(state.flags?.live_dispatch_enabled ?? preview.live_dispatch_enabled)) return LIVE_DISPATCH_OFF;
      if (preview.action !== 'dry_run_dispatch') return `Nothing to dispatch: ${preview.reason}`;
      if (preview.preflight && !preview.preflight.ok) return 'The worker preflight failed: fix the worker, then dry run again.';
      return null;
    },
    // The item the dry run showed, not whatever has come first since. The preview's key: a live call retried after an
    // error (a dropped connection, a 504) attaches to the run the first one started, if it did, and never starts a second.
    live: (_input, key, preview) => api('POST', '/control/dispatch-next', { dry_run: false, requested_by: ACTOR, project_id: preview.candidate.project_id, idempotency_key: key }),
    result: dispatchResult,
    progress: 'Dispatching (prepare, then dispatch on the worker)…',
    onLive: () => void refresh(),
  });
  /** A row's Dispatch button: the item goes into the dispatch card, whose dry run runs at once. */
  const chooseForDispatch = async (item) => {
    dispatchProject.value = item.project_id;
    dispatch.inputsChanged();
    dispatch.el.scrollIntoView({ block: 'nearest' });
    await dispatch.dryRun();
    const next = dispatch.liveButton.hidden || dispatch.liveButton.disabled ? dispatchProject : dispatch.liveButton;
    next.focus();
  };

  // Pause and resume: the form stays put across polls (what is typed survives); the flags decide which part shows.
  const pauseReason = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 2000 }));
  const pauseMaintenance = /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox' }));
  const pauseButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button' }, 'Pause the queue'));
  const resumeButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'primary' }, 'Resume'));
  const pauseForm = h('div', { class: 'fields', hidden: true }, field('Reason', pauseReason), field('Maintenance mode (blocks dispatch outright)', pauseMaintenance), h('div', { class: 'actions' }, pauseButton));
  const resumeForm = h('div', { class: 'actions', hidden: true }, resumeButton);
  const flagsOutput = h('div', { class: 'command-output' });
  pauseButton.addEventListener('click', () => {
    const reason = pauseReason.value.trim();
    if (!reason) {
      flagsOutput.replaceChildren(h('p', { class: 'error', role: 'alert' }, 'Say why the queue is paused.'));
      pauseReason.focus();
      return;
    }
    void runCommand(pauseButton, flagsOutput, () => api('POST', '/control/pause', { reason, paused_by: ACTOR, maintenance_mode: pauseMaintenance.checked }), {
      what: 'Pausing the queue',
      shown: (answer) => (answer.flags.maintenance_mode ? 'Paused, in maintenance mode.' : 'Paused.'),
      done: () => {
        pauseReason.value = '';
        pauseMaintenance.checked = false;
        void refresh().then(() => resumeButton.focus());
      },
    });
  });
  resumeButton.addEventListener('click', () =>
    runCommand(resumeButton, flagsOutput, () => api('POST', '/control/resume', { resumed_by: ACTOR }), {
      what: 'Resuming the queue',
      shown: () => 'Resumed: dispatch may go on.',
      done: () => void refresh().then(() => pauseReason.focus()),
    }),
  );

  function flagsView(flags) {
    const paused = flags.queue_paused || flags.maintenance_mode;
    pauseForm.hidden = paused;
    resumeForm.hidden = !paused;
    return h(
      'p',
      { class: 'verdict' },
      paused ? badge('paused', flags.maintenance_mode ? 'paused, maintenance' : 'paused') : badge('ok', 'open'),
      ' ',
      flags.live_dispatch_enabled ? 'Live dispatch is on.' : 'Live dispatch is off (live_dispatch_enabled in the configuration).',
    );
  }

  const filters = filterBar(
    state,
    [
      { name: 'search', label: 'Search', search: 'project, error, lane…' },
      { name: 'status', label: 'Status', values: STATUSES, blank: 'any status' },
      { name: 'sort', label: 'Sort', options: SORTS },
    ],
    () => pager.restart(),
  );

  const el = h(
    'div',
    { class: 'panel' },
    h('h2', null, 'Queue'),
    h('div', { class: 'columns' }, card('Queue control', flagsRegion.el, pauseForm, resumeForm, flagsOutput), dispatch.el),
    card(
      'Items',
      tabsRegion.el,
      filters,
      parkForm,
      commandOutput,
      list.el,
    ),
  );

  const selectGroup = (group) => {
    if (group === state.group) return;
    state.group = group;
    pager.reset();
    tabsRegion.invalidate();
    void refresh();
  };

  async function refreshList() {
    await fillPage(list, pager, {
      what: 'Reading the queue',
      read: () => api('GET', withQuery('/control/api/v1/queue', { group: state.group, status: state.status, search: state.search, sort: state.sort, cursor: pager.cursor, page_size: 25 })),
      pages: 'Queue pages',
      drawnWith: { ...state, flags: null },
      table: itemsTable(),
    });
  }

  async function refresh() {
    await Promise.all([
      api('GET', '/control/api/v1/lanes').then(
        (lanes) => {
          state.flags = lanes.dispatch;
          flagsRegion.show(lanes.dispatch, () => flagsView(lanes.dispatch));
          dispatch.update();
        },
        (error) => fill(flagsRegion, 'Reading the queue flags', () => Promise.reject(error), () => null),
      ),
      api('GET', withQuery('/control/api/v1/overview', { active_limit: 1, event_limit: 1 })).then(
        (overview) => overview.operator_detail_counts.queue.by_group,
        () => null,
      ).then((counts) =>
        tabsRegion.show({ counts, group: state.group }, () => {
          labelTabPanel(list.el, panelId, state.group);
          return tabs({ label: 'Queue groups', panelId, active: state.group, onSelect: selectGroup, tabs: GROUPS.map((group) => ({ id: group, text: words(group), count: counts?.[group] ?? null })) });
        }),
      ),
      refreshList(),
    ]);
  }

  return { el, refresh };
}
