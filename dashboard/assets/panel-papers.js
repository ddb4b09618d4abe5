// @ts-check
/** Papers: the pipeline, drafting and rewriting, the ranked review list, and one paper from its draft to its import. */
import { ACTOR, api, newKey, segment, withQuery } from './api.js';
import { h, Region } from './dom.js';
import { compactJson, count, when, words } from './format.js';
import { age, badge, card, CursorPager, empty, facts, fill, fillPage, link, table } from './ui.js';
import { DryRunCommand, runCommand } from './ui-commands.js';
import { field, filterBar, select } from './ui-forms.js';

/** @typedef {import('./app.js').PanelContext} PanelContext */

const PAPER_STATUSES = ['eligible', 'draft_generating', 'draft_review', 'publication_generating', 'publication_draft', 'human_review_required', 'archived'];
const REVIEW_STATUSES = ['unreviewed', 'triage_ready', 'in_review', 'changes_requested', 'blocked', 'approved_for_finalization', 'finalized', 'rejected'];
const CHECKLIST_STATUSES = ['pending', 'pass', 'fail', 'accepted_risk', 'not_applicable'];
/** Statuses a checklist entry needs a note for; the API refuses them without one. */
const NEEDS_A_NOTE = ['fail', 'accepted_risk'];
/** The checklist items only a person judges; the automated checklist judges the rest. */
const FOR_A_PERSON = ['novelty_significance', 'target_venue_fit', 'final_human_approval'];
const CHECKLIST_ITEM_COLUMN = { title: 'Item', cell: (item) => [words(item.item_id), FOR_A_PERSON.includes(item.item_id) ? [' ', badge('quiet', 'person')] : null] };
const JUDGED_BY_COLUMN = { title: 'Judged by', cell: (item) => item.judged_by ?? '—' };
const REVIEW_BASE = '/control/api/publication-automation';
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

/** @param {string} paperId */
function createPaperDetail(paperId) {
  const base = `${REVIEW_BASE}/${segment(paperId)}`;
  const summary = new Region();
  const draft = new Region();
  const checklist = new Region();
  const review = new Region();
  const packages = new Region();
  const events = new Region();
  const draftOutput = h('div', { class: 'command-output' });
  const checklistOutput = h('div', { class: 'command-output' });
  const reviewOutput = h('div', { class: 'command-output' });
  /** Checklist entries being edited, by item: kept across redraws so a poll never loses what the person chose. */
  const edits = new Map();
  let shownDraftSha = null;

  // Review moves: the note and blocker inputs stay put; the buttons follow the moves the review allows now.
  const moveNote = /** @type {HTMLTextAreaElement} */ (h('textarea', { rows: 2, maxlength: 10000 }));
  const moveBlocker = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 10000 }));
  const moveButtons = new Region('div', { class: 'actions' });
  const moveFields = h('div', { class: 'fields', hidden: true }, field('Note for the move', moveNote), field('Blocker (when moving to blocked)', moveBlocker));
  const checklistHint = h('p', { class: 'muted' });

  // Rewrite: one button, disabled while the workflow runs.
  const rewriteForce = /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox' }));
  const rewriteButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button' }, 'Rewrite the draft'));
  const rewriteControls = h('div', { class: 'actions', hidden: true }, rewriteButton, field('Even while a review is under way (force)', rewriteForce));
  rewriteButton.addEventListener('click', () =>
    runCommand(rewriteButton, draftOutput, () => api('POST', `${base}/rewrite-draft`, { idempotency_key: newKey(), requested_by: ACTOR, force: rewriteForce.checked }), {
      what: 'Rewriting the draft',
      progress: 'Rewriting with the configured writer…',
      shown: (answer) => `Rewritten: the paper is ${words(answer.paper?.paper_status)}.`,
      done: () => void refresh(),
    }),
  );

  const targetLabel = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 200, value: 'corpus' }));
  const finalize = new DryRunCommand({
    title: 'Finalization package',
    description: 'Needs every automated checklist item passed (or accepted); the live call also needs final human approval. It writes the package and finalizes the review.',
    fields: [field('Target label', targetLabel)],
    read: () => {
      const label = targetLabel.value.trim();
      if (!label) throw new Error('Give the package a target label.');
      return { target_label: label };
    },
    dryRun: (input) => api('POST', `${base}/prepare-finalization-package`, { idempotency_key: newKey(), requested_by: ACTOR, dry_run: true, ...input }),
    preview: (answer) => [
      h('p', null, answer.ready ? badge('pass', 'ready') : badge('fail', 'waiting'), ' ', answer.ready ? 'Every item the package needs has passed.' : `Waiting for: ${answer.waiting_for.map(words).join(', ')}`),
      facts([['Manifest sha256', h('code', null, answer.manifest_sha256)]]),
      table({
        label: 'Files in the package',
        empty: 'No files.',
        rows: answer.manifest.files,
        columns: [
          { title: 'File', cell: (file) => h('code', null, file.path) },
          { title: 'Bytes', numeric: true, cell: (file) => count(file.bytes) },
          { title: 'sha256', cell: (file) => h('code', { class: 'hash' }, file.sha256.slice(0, 16)) },
        ],
      }),
    ],
    blocked: (preview) => (preview.ready ? null : `Waiting for ${preview.waiting_for.map(words).join(', ')}: pass them in the checklist first.`),
    live: (input, key) => api('POST', `${base}/prepare-finalization-package`, { idempotency_key: key, requested_by: ACTOR, dry_run: false, ...input }),
    result: (answer) => [h('p', null, 'Package written; the review is finalized.'), facts([['Manifest sha256', h('code', null, answer.manifest_sha256)]])],
    liveLabel: 'Write the package and finalize',
    progress: 'Writing the package…',
    onLive: (answer) => {
      importSha.value = answer.manifest_sha256;
      void refresh();
    },
  });

  const corpusRepo = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 400, placeholder: 'owner/corpus' }));
  const commitSha = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 64, placeholder: 'abc1234' }));
  const importSha = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 64 }));
  const importButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'primary' }, 'Record the import'));
  const importOutput = h('div', { class: 'command-output' });
  importButton.addEventListener('click', () =>
    runCommand(
      importButton,
      importOutput,
      () =>
        api('POST', `${base}/record-import`, {
          idempotency_key: newKey(),
          requested_by: ACTOR,
          corpus_repo: corpusRepo.value.trim(),
          commit_sha: commitSha.value.trim(),
          manifest_sha256: importSha.value.trim(),
        }),
      { what: 'Recording the import', shown: () => 'Recorded: the paper counts as published.', done: () => void refresh() },
    ),
  );
  const importForm = h(
    'div',
    { class: 'fields' },
    field('Corpus repository', corpusRepo),
    field('Commit', commitSha),
    field('Manifest sha256', importSha, 'the sha256 the finalization package answered'),
    h('div', { class: 'actions' }, importButton),
    importOutput,
  );
  const importCard = card('Corpus import', packages.el, importForm);

  const el = h(
    'div',
    { class: 'panel' },
    h('p', null, link('#/papers', '← Papers')),
    h('h2', null, 'Paper'),
    card('Summary', summary.el),
    card('Draft', rewriteControls, draftOutput, draft.el),
    card('Checklist', checklistHint, checklistOutput, checklist.el),
    card('Review', review.el, moveFields, moveButtons.el, reviewOutput),
    h('div', { class: 'columns' }, finalize.el, importCard),
    card('Events', events.el),
  );

  function moveReview(button, to) {
    void runCommand(
      button,
      reviewOutput,
      () =>
        api('POST', `${base}/status`, {
          idempotency_key: newKey(),
          requested_by: ACTOR,
          review_status: to,
          note: moveNote.value.trim() || undefined,
          blocker: moveBlocker.value.trim() || undefined,
        }),
      {
        what: `Moving the review to ${words(to)}`,
        shown: (answer) => `The review is ${words(answer.paper.review_status)}.`,
        done: () => {
          moveNote.value = '';
          moveBlocker.value = '';
          void refresh();
        },
      },
    );
  }

  function saveChecklistItem(button, item) {
    const edit = edits.get(item.item_id) ?? { status: item.status, note: item.note ?? '' };
    if (NEEDS_A_NOTE.includes(edit.status) && !edit.note.trim()) {
      checklistOutput.replaceChildren(h('p', { class: 'error', role: 'alert' }, `${words(item.item_id)}: ${words(edit.status)} needs a note.`));
      return;
    }
    void runCommand(
      button,
      checklistOutput,
      () => api('POST', `${base}/checklist/${segment(item.item_id)}`, { idempotency_key: newKey(), requested_by: ACTOR, status: edit.status, note: edit.note.trim() || undefined }),
      {
        what: `Setting ${words(item.item_id)}`,
        shown: () => `${words(item.item_id)}: ${words(edit.status)}.`,
        done: () => {
          edits.delete(item.item_id);
          checklist.invalidate();
          void refresh();
        },
      },
    );
  }

  /** The checklist as it stands, for a paper whose checklist is settled. */
  function settledChecklistView(items) {
    return table({
      label: 'Checklist',
      empty: 'No checklist.',
      rows: items,
      columns: [
        CHECKLIST_ITEM_COLUMN,
        { title: 'Status', cell: (item) => badge(item.status) },
        { title: 'Note', cell: (item) => item.note ?? '—' },
        JUDGED_BY_COLUMN,
      ],
    });
  }

  function checklistView(items) {
    return table({
      label: 'Checklist',
      empty: 'No checklist.',
      rows: items,
      columns: [
        CHECKLIST_ITEM_COLUMN,
        {
          title: 'Status',
          cell: (item) => {
            const edit = edits.get(item.item_id);
            const control = /** @type {HTMLSelectElement} */ (select(CHECKLIST_STATUSES, edit?.status ?? item.status));
            control.setAttribute('aria-label', `${words(item.item_id)} status`);
            control.dataset.key = `status-${item.item_id}`;
            control.addEventListener('change', () => edits.set(item.item_id, { status: control.value, note: edits.get(item.item_id)?.note ?? item.note ?? '' }));
            return [control, ' ', badge(item.status)];
          },
        },
        {
          title: 'Note',
          cell: (item) => {
            const edit = edits.get(item.item_id);
            const input = /** @type {HTMLInputElement} */ (h('input', { type: 'text', maxlength: 10000, value: edit?.note ?? item.note ?? '', 'aria-label': `${words(item.item_id)} note`, 'data-key': `note-${item.item_id}` }));
            input.addEventListener('input', () => edits.set(item.item_id, { status: edits.get(item.item_id)?.status ?? item.status, note: input.value }));
            return input;
          },
        },
        JUDGED_BY_COLUMN,
        { title: '', cell: (item) => h('button', { type: 'button', 'data-key': `save-${item.item_id}`, onClick: (event) => saveChecklistItem(event.currentTarget, item) }, 'Save') },
      ],
    });
  }

  function summaryView(answer) {
    const paper = answer.paper;
    return [
      h('h3', { class: 'paper-title' }, paper.title ?? '(not drafted yet)'),
      facts([
        ['Paper id', h('code', null, paper.paper_id)],
        ['Stage', [badge(paper.stage), ' review ', badge(paper.review_status)]],
        ['Rank', [String(paper.rank_score), paper.rank_reasons?.length ? h('ul', { class: 'reasons' }, paper.rank_reasons.map((reason) => h('li', null, reason))) : null]],
        ['Run', [link(`#/runs/${segment(paper.run_id)}`, paper.run_id), answer.run?.decision ? [' ', badge(answer.run.decision)] : null]],
        ['Project', answer.project?.project_name ?? paper.project_id],
        ['Writer', paper.writer ? [paper.writer, paper.writer_fallback_reason ? ` (fell back: ${paper.writer_fallback_reason})` : ''] : '—'],
        ['Drafted', paper.drafted_at ? [when(paper.drafted_at), ` · ${paper.draft_count} draft(s), ${paper.rewrite_count} rewrite(s)`] : '—'],
      ]),
    ];
  }

  function reviewView(answer) {
    return [
      h('p', null, 'The review is ', badge(answer.paper.review_status), '.'),
      table({
        label: 'Review history',
        empty: 'No review moves yet.',
        rows: answer.review_history,
        columns: [
          { title: 'Move', cell: (row) => [row.from_status ? [words(row.from_status), ' → '] : null, badge(row.to_status)] },
          { title: 'Note', cell: (row) => [row.note ?? '', row.blocker ? h('span', { class: 'hint block' }, `blocker: ${row.blocker}`) : null] },
          { title: 'By', cell: (row) => row.requested_by },
          { title: 'At', cell: (row) => when(row.created_at) },
        ],
      }),
    ];
  }

  function packagesView(answer) {
    const imported = answer.corpus_import;
    importForm.hidden = !answer.paper.operator_actions.includes('record_import');
    const newest = answer.finalization_packages[0];
    if (newest && !importSha.value) importSha.value = newest.manifest_sha256;
    return [
      imported
        ? h('p', null, badge('ok', 'imported'), ` into ${imported.corpus_repo} at ${imported.commit_sha}, `, age(imported.created_at))
        : h('p', { class: 'muted' }, answer.paper.review_status === 'finalized' ? 'Finalized: record the import once the package is in the corpus.' : 'The import is recorded once the paper is finalized.'),
      table({
        label: 'Finalization packages',
        empty: 'No package written yet.',
        rows: answer.finalization_packages,
        columns: [
          { title: 'Target', cell: (row) => row.target_label },
          { title: 'Manifest sha256', cell: (row) => h('code', { class: 'hash' }, row.manifest_sha256) },
          { title: 'Written', cell: (row) => age(row.created_at) },
        ],
      }),
    ];
  }

  async function refreshDraft(paper) {
    const artifact = paper.draft_artifacts?.find((file) => file.path.endsWith('/paper.md'));
    if (!artifact) {
      draft.show('none', () => empty('No draft yet.'));
      return;
    }
    if (artifact.sha256 === shownDraftSha) return;
    await fill(draft, 'Reading the draft', () => api('GET', `/control/api/v1/papers/${segment(paperId)}/draft`), (answer) => {
      shownDraftSha = answer.sha256;
      return h('pre', { class: 'draft', tabindex: 0, 'aria-label': 'Draft as text' }, answer.markdown);
    });
  }

  async function refresh() {
    const answer = await fill(summary, 'Reading the paper', () => api('GET', withQuery(`/control/api/v1/papers/${segment(paperId)}`, { event_limit: 50 })), summaryView);
    if (!answer) return;
    const actions = answer.paper.operator_actions;
    const editable = actions.includes('set_checklist_item');
    rewriteControls.hidden = !actions.includes('rewrite_draft');
    finalize.el.hidden = !actions.includes('prepare_finalization_package');
    moveFields.hidden = !actions.includes('move_review');
    checklistHint.textContent = editable
      ? 'Fail and accepted risk need a note. Items marked “person” are for a person to judge.'
      : `The checklist is settled: the paper is ${words(answer.paper.stage)}.`;
    checklist.show({ items: answer.paper.checklist, editable }, () => (editable ? checklistView(answer.paper.checklist) : settledChecklistView(answer.paper.checklist)));
    review.show({ status: answer.paper.review_status, history: answer.review_history }, () => reviewView(answer));
    moveButtons.show(answer.review_moves, () =>
      answer.review_moves.length === 0 || !actions.includes('move_review')
        ? h('p', { class: 'muted' }, 'The review is final: no move is left.')
        : [h('span', { class: 'hint' }, 'Move the review to: '), answer.review_moves.map((to) => h('button', { type: 'button', 'data-key': `move-${to}`, onClick: (event) => moveReview(event.currentTarget, to) }, words(to)))],
    );
    packages.show({ packages: answer.finalization_packages, imported: answer.corpus_import, review: answer.paper.review_status }, () => packagesView(answer));
    events.show(answer.events, () =>
      table({
        label: 'Events of this paper',
        empty: 'No events.',
        rows: answer.events,
        columns: [
          { title: 'When', cell: (event) => when(event.created_at) },
          { title: 'Event', cell: (event) => event.event_type },
          { title: 'By', cell: (event) => event.actor ?? '—' },
          { title: 'Payload', cell: (event) => h('code', { class: 'payload' }, compactJson(event.payload)) },
        ],
      }),
    );
    await refreshDraft(answer.paper);
  }
  return { el, refresh };
}

/** @param {PanelContext} context */
export function createPapersPanel(context) {
  const [paperId] = context.params;
  return paperId ? createPaperDetail(paperId) : createPaperList(context);
}
