// @ts-check
/** One paper, from its draft to its import: its evidence, review, checklist, rewrites and the commands on it. */
import { ACTOR, api, newKey, segment, withQuery } from './api.js';
import { h, Region } from './dom.js';
import { compactJson, count, when, words } from './format.js';
import { age, badge, card, empty, facts, fill, link, table } from './ui.js';
import { DryRunCommand, runCommand } from './ui-commands.js';
import { field, select } from './ui-forms.js';

/** Where the review API lives; the list's commands call it too. */
export const REVIEW_BASE = '/control/api/publication-automation';
const CHECKLIST_STATUSES = ['pending', 'pass', 'fail', 'accepted_risk', 'not_applicable'];
/** Statuses a checklist entry needs a note for; the API refuses them without one. */
const NEEDS_A_NOTE = ['fail', 'accepted_risk'];
/** The checklist items only a person judges; the automated checklist judges the rest. */
const FOR_A_PERSON = ['novelty_significance', 'target_venue_fit', 'final_human_approval'];
const CHECKLIST_ITEM_COLUMN = { title: 'Item', cell: (item) => [words(item.item_id), FOR_A_PERSON.includes(item.item_id) ? [' ', badge('quiet', 'person')] : null] };
const JUDGED_BY_COLUMN = { title: 'Judged by', cell: (item) => item.judged_by ?? '—' };

/** @param {string} paperId */
export function createPaperDetail(paperId) {
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
