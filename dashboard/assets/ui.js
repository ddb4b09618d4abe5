// @ts-check
/** The dashboard's building blocks: cards, tables, tabs, pagers, error boxes and commands. */
import { ApiError, describeDetail, newKey } from './api.js';
import { h, swap } from './dom.js';
import { ago, duration, toneOf, when, words } from './format.js';

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

/**
 * A labelled form control. @param {string} label @param {HTMLElement} control @param {string} [hint]
 */
export function field(label, control, hint) {
  const id = control.id || uniqueId('field');
  control.id = id;
  let hintNode = null;
  if (hint) {
    const hintId = `${id}-hint`;
    control.setAttribute('aria-describedby', hintId);
    hintNode = h('span', { class: 'hint', id: hintId }, hint);
  }
  const wrapper = h('div', { class: control instanceof HTMLInputElement && control.type === 'checkbox' ? 'field check' : 'field' });
  const labelNode = h('label', { for: id }, label);
  if (control instanceof HTMLInputElement && control.type === 'checkbox') wrapper.append(control, labelNode);
  else wrapper.append(labelNode, control);
  if (hintNode) wrapper.append(hintNode);
  return wrapper;
}

/** @param {string[]} values @param {string} selected @param {string} [blank] a first option meaning “any” */
export function select(values, selected, blank) {
  return h(
    'select',
    null,
    blank === undefined ? null : h('option', { value: '', selected: selected === '' }, blank),
    values.map((value) => h('option', { value, selected: value === selected }, words(value))),
  );
}

/**
 * @typedef {{ name: string, label: string, values?: string[], blank?: string, options?: [string, string][], search?: string, hint?: string }} Filter
 * A list's filter: a select of `values` (with a `blank` “any” option) or of `options` ([value, text] pairs, a sort),
 * or, with `search` (its placeholder), a text box read after typing stops.
 */

/**
 * The filters above a list: each sets its field of `state` and calls `changed` (which goes back to the first page).
 * @param {Record<string, any>} state
 * @param {Filter[]} filters
 * @param {() => void} changed
 */
export function filterBar(state, filters, changed) {
  return h(
    'div',
    { class: 'toolbar' },
    filters.map((filter) => {
      const set = (/** @type {string} */ value) => {
        state[filter.name] = value;
        changed();
      };
      if (filter.search !== undefined) {
        const input = h('input', { type: 'search', maxlength: 200, placeholder: filter.search, value: state[filter.name] ?? '' });
        input.addEventListener('input', debounced((value) => set(value.trim())));
        return field(filter.label, input, filter.hint);
      }
      const control = filter.options
        ? h('select', null, filter.options.map(([value, text]) => h('option', { value, selected: value === state[filter.name] }, text)))
        : select(filter.values ?? [], state[filter.name] ?? '', filter.blank);
      control.addEventListener('change', () => set(/** @type {HTMLSelectElement} */ (control).value));
      return field(filter.label, control, filter.hint);
    }),
  );
}

/** Calls `action` after the person stopped typing for a moment. @param {(value: string) => void} action */
export function debounced(action, ms = 300) {
  /** @type {number | undefined} */
  let timer;
  return (/** @type {Event} */ event) => {
    const value = /** @type {HTMLInputElement} */ (event.target).value;
    clearTimeout(timer);
    timer = window.setTimeout(() => action(value), ms);
  };
}

/**
 * Shows how long a command has run, once a second, until stopped: long calls (a rewrite batch, a cycle) keep the
 * person informed and the button stays disabled meanwhile. The ticking text is not a live region: screen readers hear
 * the outcome, not every second.
 * @param {HTMLElement} where
 * @param {string} text
 */
function startProgress(where, text) {
  const started = Date.now();
  const tick = () => {
    where.textContent = `${text} ${duration((Date.now() - started) / 1000)}`;
  };
  tick();
  const timer = window.setInterval(tick, 1000);
  return () => {
    window.clearInterval(timer);
    where.textContent = '';
  };
}

/** An outcome, in a live region so that it is read out when it appears. @param {...Child} children */
const outcome = (...children) => h('div', { class: 'outcome', role: 'status' }, ...children);

/**
 * Runs one command from a button: the button is disabled while it runs (a second click does nothing), its outcome or
 * error is shown in `output`, and `done` runs after a success (to refresh the panel).
 * @param {HTMLButtonElement} button
 * @param {HTMLElement} output
 * @param {() => Promise<any>} action
 * @param {{ what: string, shown?: (answer: any) => Child, done?: (answer: any) => void, progress?: string }} options
 */
export async function runCommand(button, output, action, options) {
  if (button.disabled) return;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  // A live region before its content changes, so the outcome is read out when it arrives.
  output.setAttribute('aria-live', 'polite');
  const progressLine = h('p', { class: 'progress', 'aria-live': 'off' });
  output.replaceChildren(progressLine);
  const stop = startProgress(progressLine, options.progress ?? 'Working…');
  try {
    const answer = await action();
    stop();
    output.replaceChildren(...(options.shown ? [outcome(options.shown(answer))] : []));
    options.done?.(answer);
  } catch (error) {
    stop();
    output.replaceChildren(errorBox(error, options.what));
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
  }
}

/**
 * @typedef {{
 *   title: string,
 *   description?: string,
 *   fields?: HTMLElement[],
 *   read?: () => any,
 *   dryRun: (input: any) => Promise<any>,
 *   preview: (answer: any, input: any) => Child,
 *   live: (input: any, key: string) => Promise<any>,
 *   result: (answer: any, preview: any) => Child,
 *   liveLabel: string,
 *   blocked?: (preview: any) => string | null,
 *   replayable?: boolean,
 *   progress?: string,
 *   onLive?: (answer: any) => void,
 * }} DryRunSpec
 */

/**
 * A command that is dry-run first: its live button appears only after a dry run answered, and only for the inputs
 * that dry run saw (an input changed meanwhile, even during the dry run, takes the button away again). While a call
 * runs, both buttons are disabled.
 *
 * A command whose live call takes an idempotency key (`replayable`, the default) keeps its preview and key after a
 * failed live call, so trying again replays the same command. One that takes none (draft-next: it acts on whatever
 * is first when it runs) drops its preview instead: after an error, a new dry run shows what a retry would now do.
 */
export class DryRunCommand {
  /** @param {DryRunSpec} spec */
  constructor(spec) {
    this.spec = spec;
    /** @type {{ input: any, answer: any, key: string } | null} */
    this.previewed = null;
    this.busy = false;
    /** An input changed while a dry run was on its way: its answer no longer describes the form. */
    this.changedMeanwhile = false;
    const reasonId = uniqueId('blocked');
    this.dryButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', onClick: () => this.dryRun() }, 'Dry run'));
    this.liveButton = /** @type {HTMLButtonElement} */ (
      h('button', { type: 'button', class: 'primary', hidden: true, 'aria-describedby': reasonId, onClick: () => this.runLive() }, spec.liveLabel)
    );
    this.reason = h('span', { class: 'hint', id: reasonId });
    this.progress = h('p', { class: 'progress', 'aria-live': 'off' });
    this.output = h('div', { class: 'command-output', 'aria-live': 'polite' });
    const form = h('div', { class: 'fields' }, spec.fields ?? []);
    form.addEventListener('input', () => this.inputsChanged());
    form.addEventListener('change', () => this.inputsChanged());
    this.el = card(
      spec.title,
      spec.description ? h('p', { class: 'muted' }, spec.description) : null,
      spec.fields?.length ? form : null,
      h('div', { class: 'actions' }, this.dryButton, this.liveButton, this.reason),
      this.progress,
      this.output,
    );
  }

  inputsChanged() {
    if (this.busy) {
      this.changedMeanwhile = true;
      return;
    }
    if (this.previewed) this.forget('The inputs changed: dry run again before the live call.');
  }

  /** Takes the live button away, saying why. @param {string} why */
  forget(why) {
    this.previewed = null;
    this.output.replaceChildren(h('p', { class: 'muted' }, why));
    this.update();
  }

  /** Shows or hides the live button, and says why it is disabled; call again when what `blocked` reads changes. */
  update() {
    const blocked = this.previewed ? this.spec.blocked?.(this.previewed.answer) ?? null : null;
    this.liveButton.hidden = this.previewed === null;
    this.liveButton.disabled = this.busy || blocked !== null;
    this.dryButton.disabled = this.busy;
    this.reason.textContent = this.previewed && blocked ? blocked : '';
  }

  /** @param {string} text @param {() => Promise<void>} body */
  async busyWith(text, body) {
    if (this.busy) return;
    this.busy = true;
    this.changedMeanwhile = false;
    this.el.setAttribute('aria-busy', 'true');
    this.update();
    const stop = startProgress(this.progress, text);
    try {
      await body();
    } finally {
      stop();
      this.busy = false;
      this.el.removeAttribute('aria-busy');
      this.update();
    }
  }

  readInput() {
    return this.spec.read ? this.spec.read() : {};
  }

  async dryRun() {
    let input;
    try {
      input = this.readInput();
    } catch (error) {
      this.output.replaceChildren(errorBox(error, 'Reading the form'));
      return;
    }
    await this.busyWith('Dry run…', async () => {
      try {
        const answer = await this.spec.dryRun(input);
        if (this.changedMeanwhile) {
          this.previewed = null;
          this.output.replaceChildren(h('p', { class: 'muted' }, 'The inputs changed during the dry run: dry run again.'));
          return;
        }
        this.previewed = { input, answer, key: newKey() };
        this.output.replaceChildren(h('div', { class: 'preview' }, h('h4', null, 'Dry run'), this.spec.preview(answer, input)));
      } catch (error) {
        this.previewed = null;
        this.output.replaceChildren(errorBox(error, 'The dry run'));
      }
    });
  }

  /** Whether the form still holds what the dry run saw (a script may change an input without an event). */
  stillPreviewed() {
    const previewed = this.previewed;
    if (!previewed) return false;
    try {
      return JSON.stringify(this.readInput()) === JSON.stringify(previewed.input);
    } catch {
      return false;
    }
  }

  async runLive() {
    const previewed = this.previewed;
    if (!previewed || this.spec.blocked?.(previewed.answer)) return;
    if (!this.stillPreviewed()) {
      this.forget('The inputs changed: dry run again before the live call.');
      return;
    }
    await this.busyWith(this.spec.progress ?? 'Running…', async () => {
      try {
        const answer = await this.spec.live(previewed.input, previewed.key);
        this.previewed = null;
        this.output.replaceChildren(outcome(h('h4', null, 'Done'), this.spec.result(answer, previewed.answer)));
        this.spec.onLive?.(answer);
      } catch (error) {
        if (this.spec.replayable === false) {
          this.previewed = null;
          this.output.replaceChildren(errorBox(error, this.spec.liveLabel), h('p', { class: 'muted' }, 'Dry run again to see what a retry would do now.'));
          return;
        }
        // The preview (and its key) stays: trying again replays the same command, never a second one.
        this.output.replaceChildren(
          h('div', { class: 'preview' }, h('h4', null, 'Dry run'), this.spec.preview(previewed.answer, previewed.input)),
          errorBox(error, this.spec.liveLabel),
        );
      }
    });
  }
}

/**
 * A command that asks once more before it runs (cancel a run): the first button shows a confirm and a keep button.
 * Focus follows: to the confirm button when it appears, back to the first button when the question goes.
 * @param {{ label: string, confirmLabel: string, question: string, output: HTMLElement, action: () => Promise<any>, shown: (answer: any) => Child, done?: (answer: any) => void, what: string }} spec
 */
export function confirmCommand(spec) {
  const holder = h('span', { class: 'confirm' });
  const start = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'danger', 'data-key': `start-${spec.label}` }, spec.label));
  const reset = () => {
    holder.replaceChildren(start);
    if (start.isConnected) start.focus();
  };
  start.addEventListener('click', () => {
    const confirm = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'danger', 'data-key': `confirm-${spec.label}` }, spec.confirmLabel));
    confirm.addEventListener('click', () =>
      runCommand(confirm, spec.output, spec.action, {
        what: spec.what,
        shown: spec.shown,
        done: (answer) => {
          reset();
          spec.done?.(answer);
        },
      }),
    );
    const keep = h('button', { type: 'button', onClick: reset }, 'Keep');
    holder.replaceChildren(h('span', { class: 'question' }, spec.question), ' ', confirm, ' ', keep);
    confirm.focus();
  });
  holder.replaceChildren(start);
  return holder;
}
