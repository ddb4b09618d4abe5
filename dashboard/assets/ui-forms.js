// @ts-check
/** The dashboard's form controls: labelled fields, selects, and the filter bar above a list. */
import { h } from './dom.js';
import { words } from './format.js';
import { uniqueId } from './ui.js';


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
