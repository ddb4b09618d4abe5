// @ts-check
/** The dashboard's building blocks: cards, tables, tabs, pagers and error boxes (forms in ui-forms.js, commands in ui-commands.js). */
import { ApiError, describeDetail } from './api.js';
import { h, swap } from './dom.js';
import { ago, toneOf, when, words } from './format.js';

/** @typedef {import('./dom.js').Child} Child */

let lastId = 0;
/** A document-unique id for tying labels, descriptions and tab panels to their elements. @param {string} prefix */
export const uniqueId = (prefix) => `${prefix}-${++lastId}`;

/** A status in its tone (bad, busy, good, quiet); the words are the status, so colour is never the only signal. */
export const badge = (/** @type {unknown} */ status, /** @type {Child} */ text = words(status)) =>
  h('span', { class: ['badge', `tone-${toneOf(status)}`] }, text);

/** How long ago `iso` was, kept current by `refreshAges` (the exact time is its tooltip). @param {string | null | undefined} iso */
export const age = (iso) => (iso ? h('time', { datetime: iso, title: when(iso), 'data-age': '' }, ago(iso)) : '—');

/** Brings every age on the page up to date; the app calls it on each poll, even when no data changed. */
export function refreshAges(root = document) {
  for (const element of root.querySelectorAll('time[data-age]')) {
    const text = ago(element.getAttribute('datetime'));
    if (element.textContent !== text) element.textContent = text;
  }
}

/** A titled card. @param {string} title @param {...Child} children */
export function card(title, ...children) {
  const id = uniqueId('card');
  return h('section', { class: 'card', 'aria-labelledby': id }, h('h3', { id }, title), ...children);
}

/** What an empty list or a missing thing looks like. @param {string} text */
export const empty = (text) => h('p', { class: 'empty' }, text);

/** A link inside the dashboard. @param {string} route e.g. `#/runs/r1` @param {Child} text */
export const link = (route, text) => h('a', { href: route }, text);

/** A link to a page outside the dashboard (the Temporal UI, a source), opened apart from it. */
export const externalLink = (/** @type {string} */ url, /** @type {Child} */ text) =>
  h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, text);

/** Name–value pairs. @param {[string, Child][]} pairs */
export const facts = (pairs) => h('dl', { class: 'facts' }, pairs.map(([name, value]) => [h('dt', null, name), h('dd', null, value)]));

/** JSON shown as text, folded away unless opened. @param {string} summary @param {unknown} value */
export const jsonDetails = (summary, value) =>
  h('details', { class: 'json' }, h('summary', null, summary), h('pre', null, JSON.stringify(value, null, 2)));

/**
 * An error in place, with the API's `detail` (each validation problem on its own line).
 * @param {unknown} error
 * @param {string} [what] what failed, e.g. `Dispatch`
 */
export function errorBox(error, what = 'The request') {
  const lines = error instanceof ApiError ? describeDetail(error.detail) : [error instanceof Error ? error.message : String(error)];
  const status = error instanceof ApiError && error.status > 0 ? ` (HTTP ${error.status})` : '';
  const heading = `${what} failed${status}:`;
  return h(
    'div',
    { class: 'error', role: 'alert' },
    lines.length === 1 ? [h('strong', null, heading), ' ', lines[0]] : [h('strong', null, heading), h('ul', null, lines.map((line) => h('li', null, line)))],
  );
}

/**
 * Reads into a region: draws the answer there, or the error in its place (the other regions of the panel go on).
 * @param {import('./dom.js').Region} region
 * @param {string} what what is read, for the error, e.g. `Reading the lanes`
 * @param {() => Promise<any>} read
 * @param {(answer: any) => Child} draw
 * @param {unknown} [drawnWith] anything else the drawing depends on (filters, a selection): a change redraws
 * @returns {Promise<any>} the answer once drawn; undefined after an error (`region.failed`) or when a newer read overtook it
 */
export async function fill(region, what, read, draw, drawnWith = null) {
  const ticket = region.begin();
  let answer;
  try {
    answer = await read();
  } catch (error) {
    if (!region.isLatest(ticket)) return undefined;
    region.failed = true;
    region.invalidate();
    swap(region.el, errorBox(error, what));
    return undefined;
  }
  if (!region.isLatest(ticket)) return undefined;
  region.failed = false;
  region.show({ answer, drawnWith }, () => draw(answer));
  return answer;
}

/**
 * @typedef {{ title: string, cell: (row: any) => Child, numeric?: boolean }} Column
 * @typedef {{ label: string, columns: Column[], rows: any[], empty: string, rowClass?: (row: any) => string | undefined }} TableSpec
 * @param {TableSpec} spec
 */
export function table(spec) {
  if (spec.rows.length === 0) return empty(spec.empty);
  return h(
    'div',
    { class: 'table-wrap', role: 'region', 'aria-label': spec.label, tabindex: 0 },
    h(
      'table',
      null,
      h('caption', { class: 'visually-hidden' }, spec.label),
      h('thead', null, h('tr', null, spec.columns.map((column) => h('th', { scope: 'col', class: column.numeric ? 'num' : undefined }, column.title)))),
      h(
        'tbody',
        null,
        spec.rows.map((row) =>
          h('tr', { class: spec.rowClass?.(row) }, spec.columns.map((column) => h('td', { class: column.numeric ? 'num' : undefined }, column.cell(row)))),
        ),
      ),
    ),
  );
}

/**
 * Tabs over one panel: arrow keys, Home and End move between them (WAI-ARIA tabs pattern, activated on focus).
 * @param {{ label: string, tabs: { id: string, text: string, count?: number | null }[], active: string, panelId: string, onSelect: (id: string) => void }} spec
 */
export function tabs(spec) {
  const buttons = spec.tabs.map((tab) =>
    h(
      'button',
      {
        type: 'button',
        role: 'tab',
        id: `${spec.panelId}-tab-${tab.id}`,
        'aria-selected': tab.id === spec.active,
        'aria-controls': spec.panelId,
        tabindex: tab.id === spec.active ? 0 : -1,
        'data-key': `tab-${tab.id}`,
        onClick: () => spec.onSelect(tab.id),
      },
      tab.text,
      // Read as “Queued, 32”; seen as a count beside the name.
      typeof tab.count === 'number' ? [h('span', { class: 'visually-hidden' }, ', '), h('span', { class: 'tab-count' }, String(tab.count))] : null,
    ),
  );
  const list = h('div', { role: 'tablist', 'aria-label': spec.label, class: 'tabs' }, buttons);
  list.addEventListener('keydown', (event) => {
    const index = buttons.indexOf(/** @type {HTMLElement} */ (document.activeElement));
    if (index < 0) return;
    const moves = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: buttons.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const next = (moves[/** @type {keyof typeof moves} */ (event.key)] + buttons.length) % buttons.length;
    buttons[next]?.focus();
    spec.onSelect(spec.tabs[next]?.id ?? spec.active);
  });
  return list;
}

/**
 * One page of a v1 cursor list read into `region`: the table of its items and the pager under it.
 * @param {import('./dom.js').Region} region
 * @param {CursorPager} pager
 * @param {{ what: string, read: () => Promise<any>, table: Omit<TableSpec, 'rows'>, pages: string, drawnWith: unknown }} spec
 */
export function fillPage(region, pager, spec) {
  return fill(
    region,
    spec.what,
    spec.read,
    (answer) => {
      pager.seen(answer.page);
      return [table({ ...spec.table, rows: answer.items }), pager.view(spec.pages)];
    },
    { drawnWith: spec.drawnWith, page: pager.index },
  );
}

/** The panel a tab list controls, named by its selected tab. @param {HTMLElement} panel @param {string} panelId @param {string} active */
export function labelTabPanel(panel, panelId, active) {
  panel.setAttribute('aria-labelledby', `${panelId}-tab-${active}`);
}

/** Keyset paging for the v1 lists: the cursors of the pages seen so far, so Previous goes back without a new API. */
export class CursorPager {
  constructor(/** @type {() => void} */ onChange) {
    this.onChange = onChange;
    /** @type {(string | null)[]} */
    this.cursors = [null];
    this.index = 0;
    /** @type {string | null} */
    this.next = null;
  }

  /** Back to the first page (the filters or the sort changed). */
  reset() {
    this.cursors = [null];
    this.index = 0;
    this.next = null;
  }

  /** Back to the first page, and reads it. */
  restart() {
    this.reset();
    this.onChange();
  }

  /** The `cursor` to ask for. */
  get cursor() {
    return this.cursors[this.index] ?? null;
  }

  /** Takes the `page` block of an answer. @param {{ next_cursor: string | null }} page */
  seen(page) {
    this.next = page.next_cursor;
  }

  /** @param {string} label what is paged, e.g. `Queue pages` */
  view(label) {
    const previous = () => {
      this.index -= 1;
      this.onChange();
    };
    const next = () => {
      if (!this.next) return;
      this.cursors = [...this.cursors.slice(0, this.index + 1), this.next];
      this.index += 1;
      this.onChange();
    };
    return h(
      'nav',
      { class: 'pager', 'aria-label': label },
      h('button', { type: 'button', 'data-key': `${label}-previous`, disabled: this.index === 0, onClick: previous }, '← Previous'),
      h('span', { 'aria-live': 'polite' }, `Page ${this.index + 1}`),
      h('button', { type: 'button', 'data-key': `${label}-next`, disabled: !this.next, onClick: next }, 'Next →'),
    );
  }
}
