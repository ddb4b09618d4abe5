// @ts-check
/**
 * Research Facility: ledger counts and quality, candidates with their decision, score breakdown, reasons and lineage,
 * and the facility's commands, each dry-run first: smoke batch, provider batch, import, promotion, follow-up, cycle.
 */
import { ACTOR, api, segment, withQuery } from './api.js';
import { h, Region } from './dom.js';
import { count, decimal, words } from './format.js';
import { batchView, budgetView, candidateDetailView, countsView, DECISIONS, FACTORS } from './research-views.js';
import { age, badge, card, facts, fill, link, table } from './ui.js';
import { DryRunCommand } from './ui-commands.js';
import { field, filterBar } from './ui-forms.js';

/** How often a running cycle is asked where it is. */
const CYCLE_FOLLOW_MS = 1000;

/** @typedef {import('./app.js').PanelContext} PanelContext */

const MODES = ['fresh_grounded', 'followup_from_negative', 'moonshot', 'implementation_gap', 'paper_replication_extension', 'home_hardware_accessibility', 'manual_import'];
const PAGE_SIZE = 20;

/** A number input's value, checked against its bounds. @param {HTMLInputElement} input @param {string} name */
function readNumber(input, name, integer = true) {
  const value = Number(input.value);
  const min = Number(input.min);
  const max = input.max === '' ? Infinity : Number(input.max);
  if (input.value.trim() === '' || Number.isNaN(value) || (integer && !Number.isInteger(value)) || value < min || value > max) {
    throw new Error(`${name} must be ${integer ? 'a whole number' : 'a number'} from ${min}${max === Infinity ? '' : ` to ${max}`}.`);
  }
  return value;
}

const numberInput = (value, min, max) => /** @type {HTMLInputElement} */ (h('input', { type: 'number', value: String(value), min, max, step: 'any' }));
const checkbox = (checked) => /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox', checked }));

/** The run-cycle policy form: every field of the interface's policy, with its default. */
function cycleForm() {
  const limits = {
    max_provider_requests_per_run: numberInput(1, 0, 1),
    max_promotions_per_run: numberInput(1, 0, 1),
    max_dispatches_per_run: numberInput(0, 0, 1),
    max_paper_drafts_per_run: numberInput(0, 0, 1),
    max_publication_rewrites_per_run: numberInput(0, 0, 1),
  };
  const minScore = numberInput(72, 0, 100);
  const flags = {
    wait_for_completion: checkbox(false),
    require_budget_ok: checkbox(true),
    stop_if_queue_active: checkbox(true),
    stop_if_dashboard_attention: checkbox(true),
  };
  const fields = [
    ...Object.entries(limits).map(([name, input]) => field(words(name), input, '0 or 1')),
    field('min admission score', minScore, '0–100'),
    ...Object.entries(flags).map(([name, input]) => field(words(name), input)),
  ];
  const read = () => ({
    ...Object.fromEntries(Object.entries(limits).map(([name, input]) => [name, readNumber(input, words(name))])),
    min_admission_score: readNumber(minScore, 'min admission score', false),
    ...Object.fromEntries(Object.entries(flags).map(([name, input]) => [name, input.checked])),
  });
  return { fields, read };
}

function stagesView(answer) {
  return [
    h('p', null, badge(answer.ok ? 'ok' : 'blocked', words(answer.action)), ' ', answer.reason ?? ''),
    answer.workflow_id ? h('p', { class: 'hint' }, `Workflow ${answer.workflow_id}`) : null,
    table({
      label: 'Cycle stages',
      empty: 'No stage ran.',
      rows: answer.stages,
      columns: [
        { title: 'Stage', cell: (stage) => words(stage.name) },
        { title: 'Outcome', cell: (stage) => badge(stage.action) },
        { title: 'Reason', cell: (stage) => stage.reason },
      ],
    }),
  ];
}

/** @param {PanelContext} _context */
export function createResearchPanel(_context) {
  const state = { decision: '', generation_mode: '', search: '', page: 1, detail: /** @type {string | null} */ (null) };
  const counts = new Region();
  const budget = new Region();
  const list = new Region();
  const detail = new Region('div', { class: 'candidate-detail' });

  const smokeCount = numberInput(3, 1, 3);
  const smoke = new DryRunCommand({
    title: 'Smoke batch',
    description: 'Deterministic candidates from the starter sources, scored by the planner. Writes Research Facility rows only; nothing is queued.',
    fields: [field('Candidates', smokeCount, '1–3')],
    read: () => ({ count: readNumber(smokeCount, 'Candidates') }),
    dryRun: (input) => api('POST', '/control/api/research/generate-batch', { dry_run: true, requested_by: ACTOR, ...input }),
    preview: batchView,
    live: (input, key) => api('POST', '/control/api/research/generate-batch', { dry_run: false, requested_by: ACTOR, idempotency_key: key, ...input }),
    result: batchView,
    liveLabel: 'Generate it',
    onLive: () => void refresh(),
  });

  const providerCount = numberInput(2, 1, 5);
  const provider = new DryRunCommand({
    title: 'Provider batch',
    description: 'Asks the research provider for candidates, after checking its budget (fail-closed). The dry run spends no request.',
    fields: [field('Candidates', providerCount, '1–5')],
    read: () => ({ count: readNumber(providerCount, 'Candidates') }),
    dryRun: (input) => api('POST', '/control/api/research/generate-provider-batch', { dry_run: true, requested_by: ACTOR, ...input }),
    preview: (answer) => [h('p', null, badge(answer.ok ? 'ok' : 'blocked', words(answer.action)), ' ', answer.reason), budgetView(answer.budget)],
    blocked: (preview) => (preview.action === 'dry_run_provider_generation' ? null : `Blocked: ${preview.reason}`),
    live: (input, key) => api('POST', '/control/api/research/generate-provider-batch', { dry_run: false, requested_by: ACTOR, idempotency_key: key, ...input }),
    result: (answer) => [
      h('p', null, badge(answer.ok ? 'ok' : 'blocked', words(answer.action)), ' ', answer.reason),
      answer.results ? batchView(answer) : null,
      answer.invalid?.length ? h('p', { class: 'error-text' }, `${answer.invalid.length} candidate(s) from the provider failed validation and were not stored.`) : null,
    ],
    liveLabel: 'Spend one request',
    progress: 'Asking the provider…',
    onLive: () => {
      void readBudget();
      void refresh();
    },
  });

  const promoteId = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 200, placeholder: 'select an admitted candidate below' }));
  const promote = new DryRunCommand({
    title: 'Promote the selected candidate',
    description: 'Exactly one admitted candidate becomes an idea, a project and a queued item; its lineage is recorded first.',
    fields: [field('Candidate id', promoteId)],
    read: () => {
      const candidateId = promoteId.value.trim();
      if (!candidateId) throw new Error('Select a candidate in the list below (or paste its id).');
      return { candidate_id: candidateId };
    },
    dryRun: (input) => api('POST', '/control/api/research/promote-candidate', { dry_run: true, requested_by: ACTOR, ...input }),
    preview: (answer) =>
      facts([
        ['Would promote', answer.idea?.title ?? answer.candidate_id],
        ['Project', `${answer.project?.project_id} (${words(answer.project?.workload_class)})`],
        ['Queue item', answer.queue_item ? words(answer.queue_item.status) : '—'],
      ]),
    live: (input, key) => api('POST', '/control/api/research/promote-candidate', { dry_run: false, requested_by: ACTOR, idempotency_key: key, ...input }),
    result: (answer) => h('p', null, `Promoted: project ${answer.project_id} is `, link(`#/queue/queued/${segment(answer.project_id)}`, 'queued'), '.'),
    liveLabel: 'Promote it',
    onLive: () => void refresh(),
  });

  const importText = /** @type {HTMLTextAreaElement} */ (h('textarea', { rows: 6, spellcheck: 'false', placeholder: '{"candidates": [{"title": "…", "dedupe_key": "…", "novelty": 8, "feasibility": 8, …}], "sources": []}' }));
  const importing = new DryRunCommand({
    title: 'Import candidates',
    description: 'Candidates an operator supplies (manual import), as JSON with a "candidates" array and optional "sources"; scored like any other.',
    fields: [field('Batch (JSON)', importText)],
    read: () => {
      let parsed;
      try {
        parsed = JSON.parse(importText.value);
      } catch {
        throw new Error('The batch is not valid JSON.');
      }
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('The batch must be a JSON object with a "candidates" array.');
      return parsed;
    },
    dryRun: (input) => api('POST', '/control/api/research/import-candidates', { ...input, dry_run: true, requested_by: ACTOR }),
    preview: batchView,
    live: (input, key) => api('POST', '/control/api/research/import-candidates', { ...input, dry_run: false, requested_by: ACTOR, idempotency_key: key }),
    result: batchView,
    liveLabel: 'Import it',
    onLive: () => void refresh(),
  });

  const followup = new DryRunCommand({
    title: 'Follow-up of a negative run',
    description: 'Plans one follow-up candidate for the next negative or inconclusive run without a paper, and queues it when admitted.',
    dryRun: () => api('POST', '/control/api/v1/followups/launch-next', { dry_run: true, requested_by: ACTOR }),
    preview: (answer) => [
      h('p', null, badge(answer.ok ? 'ok' : 'quiet', words(answer.action)), ' ', answer.reason),
      answer.parent_run ? facts([['Parent run', link(`#/runs/${segment(answer.parent_run.run_id)}`, answer.parent_run.run_id)], ['Candidate', answer.candidate?.title ?? '—']]) : null,
    ],
    blocked: (preview) => (preview.action === 'dry_run_followup' ? null : `Nothing to follow up: ${preview.reason}`),
    live: (_input, key) => api('POST', '/control/api/v1/followups/launch-next', { dry_run: false, requested_by: ACTOR, idempotency_key: key }),
    result: (answer) => h('p', null, badge(answer.ok ? 'ok' : 'quiet', words(answer.action)), ' ', answer.reason),
    liveLabel: 'Launch it',
    onLive: () => void refresh(),
  });

  const policy = cycleForm();
  const cycle = new DryRunCommand({
    title: 'Run a bounded cycle',
    description: 'Stop conditions, then at most one provider request, promotion, dispatch, draft and rewrite, as the policy allows. The dry run spends and writes nothing.',
    fields: policy.fields,
    read: policy.read,
    dryRun: (input) => api('POST', '/control/api/research/run-cycle', { dry_run: true, requested_by: ACTOR, ...input }),
    preview: stagesView,
    blocked: (preview) => (preview.ok ? null : `Stopped: ${preview.reason}`),
    live: async (input, key) => {
      // The call answers once the cycle has started; the cycle is followed until it has finished.
      let answer = await api('POST', '/control/api/research/run-cycle', { dry_run: false, enabled: true, requested_by: ACTOR, idempotency_key: key, ...input });
      while (answer.action === 'research_cycle_running') {
        await new Promise((resolve) => setTimeout(resolve, CYCLE_FOLLOW_MS));
        answer = await api('GET', `/control/api/research/cycles/${segment(key)}`);
      }
      return answer;
    },
    result: stagesView,
    liveLabel: 'Run the cycle',
    progress: 'Running the cycle (with a dispatch awaited, this takes as long as the run; leaving this page leaves it running)…',
    onLive: () => void refresh(),
  });

  // The budget asks the provider's quota endpoint: read on opening the panel and on request, not on every poll.
  let budgetRead = false;
  const readBudget = async () => {
    budgetRead = true;
    await fill(budget, 'Reading the provider budget', () => api('GET', '/control/api/research/provider-budget'), budgetView);
  };
  const budgetButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button' }, 'Check the budget again'));
  budgetButton.addEventListener('click', async () => {
    budgetButton.disabled = true;
    try {
      await readBudget();
    } finally {
      budgetButton.disabled = false;
    }
  });

  const selectCandidate = (candidate) => {
    promoteId.value = candidate.candidate_id;
    promoteId.dispatchEvent(new Event('input', { bubbles: true }));
    promote.el.scrollIntoView({ block: 'nearest' });
    promoteId.focus();
  };
  const showDetail = (candidateId) => {
    state.detail = state.detail === candidateId ? null : candidateId;
    void refreshDetail();
  };

  const filters = filterBar(
    state,
    [
      { name: 'decision', label: 'Decision', values: DECISIONS, blank: 'any decision' },
      { name: 'generation_mode', label: 'Mode', values: MODES, blank: 'any mode' },
      { name: 'search', label: 'Search', search: 'title, hypothesis, dedupe key…' },
    ],
    () => {
      state.page = 1;
      void refreshList();
    },
  );

  function candidatesView(answer) {
    const pages = Math.max(1, Math.ceil(answer.total / PAGE_SIZE));
    const go = (page) => {
      state.page = page;
      void refreshList();
    };
    return [
      table({
        label: 'Candidates',
        empty: state.decision || state.generation_mode || state.search ? 'No candidate matches these filters.' : 'No candidates yet: generate a smoke batch.',
        rows: answer.items,
        rowClass: (candidate) => (candidate.candidate_id === state.detail ? 'selected' : undefined),
        columns: [
          { title: 'Candidate', cell: (candidate) => [h('span', { class: 'candidate-title' }, candidate.title), h('span', { class: 'hint block' }, words(candidate.generation_mode))] },
          { title: 'Decision', cell: (candidate) => badge(candidate.decision) },
          { title: 'Score', numeric: true, cell: (candidate) => decimal(candidate.score) },
          { title: 'N / F / A / Fa', cell: (candidate) => FACTORS.map((factor) => candidate[factor] ?? '—').join(' / ') },
          { title: 'Queued', cell: (candidate) => (candidate.queue_admitted ? badge('ok', 'promoted') : '—') },
          { title: 'Created', cell: (candidate) => age(candidate.created_at) },
          {
            title: 'Actions',
            cell: (candidate) =>
              h(
                'span',
                { class: 'row-actions' },
                h('button', { type: 'button', 'data-key': `detail-${candidate.candidate_id}`, 'aria-expanded': candidate.candidate_id === state.detail, onClick: () => showDetail(candidate.candidate_id) }, 'Details'),
                candidate.decision === 'admitted' && !candidate.queue_admitted
                  ? h('button', { type: 'button', 'data-key': `select-${candidate.candidate_id}`, onClick: () => selectCandidate(candidate) }, 'Select for promotion')
                  : null,
              ),
          },
        ],
      }),
      h(
        'nav',
        { class: 'pager', 'aria-label': 'Candidate pages' },
        h('button', { type: 'button', 'data-key': 'candidates-previous', disabled: state.page <= 1, onClick: () => go(state.page - 1) }, '← Previous'),
        h('span', { 'aria-live': 'polite' }, `Page ${state.page} of ${pages} · ${count(answer.total)} candidate(s)`),
        h('button', { type: 'button', 'data-key': 'candidates-next', disabled: !answer.has_more, onClick: () => go(state.page + 1) }, 'Next →'),
      ),
    ];
  }

  const el = h(
    'div',
    { class: 'panel' },
    h('h2', null, 'Research Facility'),
    card('Ledgers', counts.el),
    card('Candidates', filters, list.el, detail.el),
    h('div', { class: 'columns' }, promote.el, smoke.el),
    h('div', { class: 'columns' }, h('div', null, card('Provider budget', budget.el, h('div', { class: 'actions' }, budgetButton)), provider.el), cycle.el),
    h('div', { class: 'columns' }, importing.el, followup.el),
  );

  async function refreshList() {
    await fill(
      list,
      'Reading the candidates',
      () => api('GET', withQuery('/control/api/research/candidates', { decision: state.decision, generation_mode: state.generation_mode, search: state.search, page: state.page, page_size: PAGE_SIZE })),
      candidatesView,
      { ...state },
    );
  }

  async function refreshDetail() {
    const candidateId = state.detail;
    list.invalidate();
    if (!candidateId) {
      detail.show(null, () => null);
      await refreshList();
      return;
    }
    await Promise.all([fill(detail, 'Reading the candidate', () => api('GET', `/control/api/research/candidates/${segment(candidateId)}`), candidateDetailView), refreshList()]);
  }

  async function refresh() {
    await Promise.all([
      fill(counts, 'Reading the facility', async () => {
        const [facility, quality] = await Promise.all([api('GET', '/control/api/research/facility'), api('GET', '/control/api/v1/research-quality').catch(() => null)]);
        return { facility: { counts: facility.counts, min_admission_score: facility.min_admission_score, needs_review_min_score: facility.needs_review_min_score, planner_version: facility.planner_version }, quality };
      }, countsView),
      budgetRead ? null : readBudget(),
      state.detail ? refreshDetail() : refreshList(),
    ]);
  }

  return { el, refresh };
}
