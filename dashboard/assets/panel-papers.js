// @ts-check
/** Papers: the pipeline, drafting and rewriting, the ranked review list; one paper's page is in panel-paper-detail.js. */
import { ACTOR, api, newKey, segment, withQuery } from './api.js';
import { h, Region } from './dom.js';
import { compactJson, count, words } from './format.js';
import { createPaperDetail, REVIEW_BASE } from './panel-paper-detail.js';
import { age, badge, card, CursorPager, facts, fill, fillPage, link, table } from './ui.js';
import { DryRunCommand } from './ui-commands.js';
import { field, filterBar, select } from './ui-forms.js';

/** @typedef {import('./app.js').PanelContext} PanelContext */

const PAPER_STATUSES = ['eligible', 'draft_generating', 'draft_review', 'publication_generating', 'publication_draft', 'human_review_required', 'archived'];
const REVIEW_STATUSES = ['unreviewed', 'triage_ready', 'in_review', 'changes_requested', 'blocked', 'approved_for_finalization', 'finalized', 'rejected'];
/** @type {[string, string][]} */
const SORTS = [
  ['-rank_score', 'Highest rank'],
  ['-updated_at', 'Recently updated'],
  ['-created_at', 'Newest'],
  ['rank_score', 'Lowest rank'],
];

const paperLink = (paper) => link(`#/papers/${segment(paper.paper_id)}`, paper.title ?? paper.paper_id);

function pipelineView(overview) {
  const pipeline = overview.paper_pipeline;
  const byStatus = overview.operator_detail_counts.papers.by_paper_status;
  return [
    h(
      'ul',
      { class: 'stat-row' },
      [
        ['write_needed', 'Write needed', 'completed positive runs without a draft'],
        ['publish_ready', 'Publish ready', 'finalized, waiting for the corpus import'],
        ['published_imported', 'Published', 'recorded in a corpus'],
        ['not_writable_by_decision_gate', 'Not writable', 'a decision the gate does not write up'],
        ['raw_completed_no_paper_candidates', 'No paper evidence', 'completed without paper evidence'],
      ].map(([key, title, hint]) => h('li', { class: 'stat' }, h('span', { class: 'stat-value' }, count(pipeline[key])), h('span', { class: 'stat-title' }, title), h('span', { class: 'hint' }, hint))),
    ),
    h('p', { class: 'hint' }, 'Papers by status: ', PAPER_STATUSES.map((status, index) => [index ? ' · ' : '', `${words(status)} ${count(byStatus[status])}`])),
  ];
}

function evidenceFacts(evidence) {
  if (!evidence) return null;
  return facts([
    ['Evidence', evidence.complete ? badge('pass', 'complete') : badge('fail', 'missing')],
    ['Found', evidence.found?.length ? evidence.found.join(', ') : '—'],
    ['Missing', evidence.missing?.length ? evidence.missing.join(', ') : '—'],
  ]);
}

function skippedList(skipped) {
  if (!skipped?.length) return null;
  return h('div', null, h('p', null, `Skipped ${skipped.length} for missing evidence:`), h('ul', null, skipped.map((item) => h('li', null, `${item.paper_id ?? item.run_id}: ${compactJson(item.missing ?? item.reason ?? item)}`))));
}

function selectionTable(papers, label) {
  return table({
    label,
    empty: 'No paper is selected.',
    rows: papers,
    columns: [
      { title: 'Paper', cell: paperLink },
      { title: 'Status', cell: (paper) => badge(paper.paper_status) },
      { title: 'Review', cell: (paper) => badge(paper.review_status) },
      { title: 'Rank', numeric: true, cell: (paper) => String(paper.rank_score) },
    ],
  });
}

/** @param {PanelContext} _context */
function createPaperList(_context) {
  const state = { status: '', review_status: '', search: '', sort: '-rank_score' };
  const pager = new CursorPager(() => void refreshList());
  const pipeline = new Region();
  const list = new Region();

  const forceDraft = /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox' }));
  const draftNext = new DryRunCommand({
    title: 'Draft the next paper',
    description: 'The dry run names the completed positive run that would be written up and checks its evidence; it writes nothing.',
    fields: [field('Also redraft papers already drafted (force)', forceDraft)],
    read: () => ({ force: forceDraft.checked }),
    dryRun: (input) => api('POST', '/control/papers/draft-next', { dry_run: true, requested_by: ACTOR, ...input }),
    preview: (answer) => [
      h('p', null, badge(answer.action), ' ', answer.reason ?? (answer.paper_id ? `would draft ${answer.paper_id} with the ${answer.writer} writer` : '')),
      evidenceFacts(answer.evidence),
      skippedList(answer.skipped),
    ],
    blocked: (preview) => (preview.action === 'dry_run_draft' ? null : `Nothing to draft: ${preview.reason ?? 'no candidate'}`),
    live: (input) => api('POST', '/control/papers/draft-next', { dry_run: false, requested_by: ACTOR, ...input }),
    // It drafts whatever is first when it runs; after an error only a new dry run says what that is.
    replayable: false,
    result: (answer) => [
      h('p', null, badge(answer.action), ' ', answer.paper ? [paperLink(answer.paper), ' is ', words(answer.paper.paper_status)] : answer.reason ?? ''),
      skippedList(answer.skipped),
    ],
    liveLabel: 'Draft it',
    progress: 'Drafting…',
    onLive: () => void refresh(),
  });

  const batchPaperStatus = select(['draft_review', 'publication_draft', 'human_review_required'], '', 'any rewritable status');
  const batchReviewStatus = select(REVIEW_STATUSES, '', 'any review status');
  const batchSearch = /** @type {HTMLInputElement} */ (h('input', { type: 'search' }));
  const batchLimit = /** @type {HTMLInputElement} */ (h('input', { type: 'number', min: 1, max: 200, value: '10', required: true }));
  const batchForce = /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox' }));
  const batchSkip = /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox' }));
  const rewriteBatch = new DryRunCommand({
    title: 'Rewrite a batch of drafts',
    description: 'Rewrites drafts with the configured writer, highest rank first, one after another. The dry run lists the selection.',
    fields: [
      field('Paper status', batchPaperStatus),
      field('Review status', batchReviewStatus),
      field('Search', batchSearch),
      field('At most', batchLimit, '1–200'),
      field('Include reviews under way (force)', batchForce),
      field('Only drafts never rewritten', batchSkip),
    ],
    read: () => {
      const limit = Number(batchLimit.value);
      if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw new Error('“At most” must be a whole number from 1 to 200.');
      return {
        paper_status: /** @type {HTMLSelectElement} */ (batchPaperStatus).value || undefined,
        review_status: /** @type {HTMLSelectElement} */ (batchReviewStatus).value || undefined,
        search: batchSearch.value.trim() || undefined,
        limit,
        force: batchForce.checked,
        skip_rewritten: batchSkip.checked,
      };
    },
    dryRun: (input) => api('POST', `${REVIEW_BASE}/rewrite-batch`, { idempotency_key: newKey(), requested_by: ACTOR, dry_run: true, ...input }),
    preview: (answer) => [h('p', null, `${answer.count} draft(s) would be rewritten.`), selectionTable(answer.selected, 'Drafts the batch would rewrite')],
    blocked: (preview) => (preview.count > 0 ? null : 'Nothing matches: change the selection.'),
    live: (input, key) => api('POST', `${REVIEW_BASE}/rewrite-batch`, { idempotency_key: key, requested_by: ACTOR, dry_run: false, ...input }),
    result: (answer) => [
      h('p', null, `Rewrote ${answer.rewritten} of ${answer.count}.`),
      table({
        label: 'Rewrite results',
        empty: 'No paper was rewritten.',
        rows: answer.results,
        columns: [
          { title: 'Paper', cell: (row) => link(`#/papers/${segment(row.paper_id)}`, row.paper_id) },
          { title: 'Outcome', cell: (row) => badge(row.outcome === 'drafted' ? 'pass' : 'fail', words(row.outcome)) },
          { title: 'Detail', cell: (row) => row.error ?? row.reason ?? '' },
        ],
      }),
    ],
    liveLabel: 'Rewrite them',
    progress: 'Rewriting (a batch may take minutes)…',
    onLive: () => void refresh(),
  });

  const filters = filterBar(
    state,
    [
      { name: 'status', label: 'Paper status', values: PAPER_STATUSES, blank: 'any paper status' },
      { name: 'review_status', label: 'Review', values: REVIEW_STATUSES, blank: 'any review status' },
      { name: 'search', label: 'Search', search: 'title, project, run…' },
      { name: 'sort', label: 'Sort', options: SORTS },
    ],
    () => pager.restart(),
  );

  const el = h(
    'div',
    { class: 'panel' },
    h('h2', null, 'Papers'),
    card('Pipeline', pipeline.el),
    h('div', { class: 'columns' }, draftNext.el, rewriteBatch.el),
    card(
      'Review list',
      h('p', { class: 'muted' }, 'Ranked by rank score; each score lists the reasons it is made of.'),
      filters,
      list.el,
    ),
  );

  async function refreshList() {
    await fillPage(list, pager, {
      what: 'Reading the papers',
      read: () => api('GET', withQuery('/control/api/v1/papers', { ...state, cursor: pager.cursor, page_size: 25 })),
      pages: 'Paper pages',
      drawnWith: state,
      table: {
        label: 'Papers by rank',
        empty: state.status || state.review_status || state.search ? 'No paper matches these filters.' : 'No papers yet: draft one from a completed positive run.',
        columns: [
          { title: 'Paper', cell: (paper) => [paperLink(paper), h('span', { class: 'hint block' }, paper.project_id)] },
          { title: 'Stage', cell: (paper) => badge(paper.stage) },
          { title: 'Review', cell: (paper) => badge(paper.review_status) },
          { title: 'Rank', numeric: true, cell: (paper) => String(paper.rank_score) },
          { title: 'Why', cell: (paper) => (paper.rank_reasons?.length ? h('ul', { class: 'reasons' }, paper.rank_reasons.map((reason) => h('li', null, reason))) : '—') },
          { title: 'Updated', cell: (paper) => age(paper.updated_at) },
        ],
      },
    });
  }

  async function refresh() {
    await Promise.all([
      fill(pipeline, 'Reading the paper pipeline', () => api('GET', withQuery('/control/api/v1/overview', { active_limit: 1, event_limit: 1 })).then((overview) => ({ paper_pipeline: overview.paper_pipeline, operator_detail_counts: { papers: overview.operator_detail_counts.papers } })), pipelineView),
      refreshList(),
    ]);
  }
  return { el, refresh };
}

/** @param {PanelContext} context */
export function createPapersPanel(context) {
  const [paperId] = context.params;
  return paperId ? createPaperDetail(paperId) : createPaperList(context);
}
