// @ts-check
/**
 * Markdown an agent wrote (run notes), drawn as elements built one by one: headings, paragraphs, lists, block quotes,
 * fenced code, tables, and inline code, emphasis and links. Markup in it (a <script>, an <img onerror>) stays text: no
 * string is ever parsed as HTML. A link goes only to an http(s) page (dom.js safeHref), in a new tab without the
 * opener; an image is named by its alt text and never fetched.
 */
import { h } from './dom.js';

/** @typedef {import('./dom.js').Child} Child */

// Underscores emphasise only at word edges: `window.__xss` or `snake_case_name` stay as they are.
const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|(?<!\w)__([^_]+)__(?!\w)|\*([^*\s][^*]*)\*|(?<!\w)_([^_\s][^_]*)_(?!\w)|!\[([^\]]*)\]\([^)]*\)|\[([^\]]+)\]\(([^)\s]+)\)/g;

/** @param {string} text @returns {Child[]} */
export function inline(text) {
  /** @type {Child[]} */
  const out = [];
  let at = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > at) out.push(text.slice(at, match.index));
    const [, , code, strong, strong2, em, em2, imageAlt, label, href] = match;
    if (code !== undefined) out.push(h('code', null, code));
    else if (strong !== undefined || strong2 !== undefined) out.push(h('strong', null, inline(strong ?? strong2 ?? '')));
    else if (em !== undefined || em2 !== undefined) out.push(h('em', null, inline(em ?? em2 ?? '')));
    else if (imageAlt !== undefined) out.push(h('span', { class: 'md-image' }, `[image: ${imageAlt || 'no description'}]`));
    else out.push(h('a', { href, target: '_blank', rel: 'noopener noreferrer nofollow' }, inline(label ?? '')));
    at = match.index + match[0].length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

const cells = (line) => line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((cell) => cell.trim());
const isTableRule = (line) => /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(line);

/** @param {string} source @returns {HTMLElement} */
export function markdown(source) {
  const lines = source.replace(/\r\n?/g, '\n').split('\n');
  /** @type {HTMLElement[]} */
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === '') {
      i++;
      continue;
    }
    const fence = /^\s*(```|~~~)/.exec(line);
    if (fence) {
      const body = [];
      for (i++; i < lines.length && !lines[i].trimStart().startsWith(fence[1]); i++) body.push(lines[i]);
      i++;
      blocks.push(h('pre', { class: 'md-code' }, h('code', null, body.join('\n'))));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      // Headings sit below the page's own: an agent's "# Title" is an h3 here.
      blocks.push(h(`h${Math.min(6, heading[1].length + 2)}`, null, inline(heading[2])));
      i++;
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && isTableRule(lines[i + 1])) {
      const head = cells(line);
      const rows = [];
      for (i += 2; i < lines.length && lines[i].includes('|') && lines[i].trim() !== ''; i++) rows.push(cells(lines[i]));
      blocks.push(
        h('div', { class: 'table-wrap' }, h('table', null, h('thead', null, h('tr', null, head.map((cell) => h('th', { scope: 'col' }, inline(cell))))), h('tbody', null, rows.map((row) => h('tr', null, row.map((cell) => h('td', null, inline(cell)))))))),
      );
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(line);
    if (item) {
      const ordered = /\d/.test(item[1]);
      const entries = [];
      while (i < lines.length) {
        const next = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(lines[i]);
        if (!next || /\d/.test(next[1]) !== ordered) break;
        entries.push(h('li', null, inline(next[2])));
        i++;
      }
      blocks.push(h(ordered ? 'ol' : 'ul', null, entries));
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quoted = [];
      for (; i < lines.length && /^\s*>/.test(lines[i]); i++) quoted.push(lines[i].replace(/^\s*>\s?/, ''));
      blocks.push(h('blockquote', null, markdown(quoted.join('\n'))));
      continue;
    }
    const paragraph = [];
    for (; i < lines.length && lines[i].trim() !== '' && !/^(#{1,6}\s|\s*```|\s*~~~|\s*>|\s*([-*+]|\d+[.)])\s)/.test(lines[i]); i++) paragraph.push(lines[i].trim());
    if (paragraph.length === 0) {
      // A line no rule takes (it looked like a block start but is not one): shown as it is.
      paragraph.push(line);
      i++;
    }
    blocks.push(h('p', null, inline(paragraph.join(' '))));
  }
  return h('div', { class: 'markdown' }, blocks);
}
