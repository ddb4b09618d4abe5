// @ts-check
/**
 * Building the page from data. Every child that is not a DOM node becomes a Text node, and attributes are set one by
 * one, so nothing the API answers (a candidate title, a paper draft, an error) is ever parsed as HTML. The page's
 * Content-Security-Policy enforces Trusted Types, so an HTML sink such as `innerHTML` would throw rather than parse.
 */

/** A child of `h`: a node, text, nothing, or a (nested) list of these. @typedef {Node | string | number | boolean | null | undefined | any[]} Child */

const PROPERTIES = new Set(['value', 'checked', 'disabled', 'selected', 'hidden', 'required', 'open', 'readOnly', 'indeterminate']);

/** Links may go to this origin's paths and fragments, or to http(s) pages; anything else (javascript:, data:) goes nowhere. */
export function safeHref(value) {
  const text = String(value);
  // A path of this origin; `//host` and `/\\host` would leave it.
  if (text.startsWith('#') || (text.startsWith('/') && !/^\/[\\/]/.test(text))) return text;
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : '#';
  } catch {
    return '#';
  }
}

/**
 * An element with attributes, event listeners (`onClick`, `onInput`, …) and children.
 * @param {string} tag
 * @param {Record<string, any> | null} [props]
 * @param {...Child} children
 * @returns {HTMLElement}
 */
export function h(tag, props, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      element.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'class') {
      const names = Array.isArray(value) ? value.filter(Boolean).join(' ') : value;
      if (names) element.className = names;
    } else if (PROPERTIES.has(key)) {
      /** @type {any} */ (element)[key] = value;
    } else if (key === 'href') {
      element.setAttribute('href', safeHref(value));
    } else if (key.startsWith('aria-') || key.startsWith('data-')) {
      element.setAttribute(key, String(value));
    } else if (value !== false) {
      element.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

/** @param {Node} parent @param {Child[]} children */
function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false || child === true) continue;
    if (Array.isArray(child)) append(parent, child);
    else if (child instanceof Node) parent.appendChild(child);
    else parent.appendChild(document.createTextNode(String(child)));
  }
}

/** @param {Child[]} children @returns {Node[]} */
function nodes(children) {
  const holder = document.createDocumentFragment();
  append(holder, children);
  return [...holder.childNodes];
}

/**
 * Replaces what `region` shows. Focus stays on the control the person was using when the new content has one with
 * the same `data-key`, so a poll that redraws a table does not throw keyboard users back to the top.
 * @param {Element} region
 * @param {...Child} children
 */
export function swap(region, ...children) {
  const active = document.activeElement;
  const key = active instanceof HTMLElement && region.contains(active) ? active.dataset.key : undefined;
  region.replaceChildren(...nodes(children));
  if (key) {
    const again = region.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (again instanceof HTMLElement) again.focus();
  }
}

/**
 * A region that redraws only when what it shows changed: polling every few seconds then leaves the page (and any
 * text selection in it) alone while nothing happens. It also numbers the reads meant for it, so an answer that
 * arrives after a newer read was started (a filter changed meanwhile) is dropped instead of drawn.
 */
export class Region {
  constructor(tag = 'div', props = {}) {
    this.el = h(tag, props);
    /** @type {string | undefined} */
    this.shown = undefined;
    this.reads = 0;
    /** Whether the last read that finished failed (the region then shows its error). */
    this.failed = false;
  }

  /** Numbers a new read of this region; pass the number to `isLatest` when its answer arrives. */
  begin() {
    this.reads += 1;
    return this.reads;
  }

  /** @param {number} read */
  isLatest(read) {
    return read === this.reads;
  }

  /**
   * @param {unknown} data what the content is drawn from; compared with the last draw
   * @param {() => Child} draw
   */
  show(data, draw) {
    const fingerprint = JSON.stringify(data) ?? 'undefined';
    if (fingerprint === this.shown) return;
    this.shown = fingerprint;
    swap(this.el, draw());
  }

  /** Draws whatever happens next, even the same data (after an error or a local change). */
  invalidate() {
    this.shown = undefined;
  }
}
