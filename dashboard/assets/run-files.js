// @ts-check
/**
 * A run's result files on its page (GET /control/api/v1/runs/{run_id}/files): path, size and SHA-256, and a preview of
 * one at a time. The agent wrote every byte: text and JSON show as text, Markdown as elements built one by one
 * (markdown.js), an image through a blob: URL in an <img> (an SVG there runs no script). The list is read on request,
 * never by a poll: the gate hashes every file to answer it, and the run's worker may be far away or gone.
 */
import { api, segment, withQuery } from './api.js';
import { h } from './dom.js';
import { count } from './format.js';
import { card, empty, errorBox, table } from './ui.js';
import { markdown } from './markdown.js';

/** @param {number} bytes */
const size = (bytes) => (bytes < 1024 ? `${bytes} B` : bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);

/** @param {any} file */
function textPreview(file) {
  if (file.preview === 'markdown') return markdown(file.content);
  if (file.preview === 'json' && !file.truncated) {
    try {
      return h('pre', { class: 'file-text' }, JSON.stringify(JSON.parse(file.content), null, 2));
    } catch {
      // Not JSON after all: shown as the text it is.
    }
  }
  return h('pre', { class: 'file-text' }, file.content);
}

/** @param {string} runId */
export function createRunFiles(runId) {
  const list = h('div');
  const preview = h('div', { class: 'file-preview', 'aria-live': 'polite' });
  /** @type {string | null} */
  let imageUrl = null;
  const forgetImage = () => {
    if (imageUrl) URL.revokeObjectURL(imageUrl);
    imageUrl = null;
  };
  const readAgain = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', 'data-key': 'read-files', onClick: () => void read() }, 'List the result files'));
  const el = card('Result files', h('p', { class: 'muted' }, 'Read from the worker now: the project as it is, not as it was when the run ended.'), list, h('div', { class: 'actions' }, readAgain), preview);

  /** @param {any} file */
  function drawPreview(file) {
    forgetImage();
    const heading = h('h4', null, file.path);
    const cut = file.truncated
      ? h('p', { class: 'notice' }, file.preview === 'image' ? `Too large to preview (${size(file.size)}).` : `Only the beginning is shown: the file has ${size(file.size)}.`)
      : null;
    if (file.content === null) return [heading, cut ?? empty(`No preview for ${file.media_type}.`)];
    if (file.encoding === 'base64') {
      const bytes = Uint8Array.from(atob(file.content), (char) => char.charCodeAt(0));
      imageUrl = URL.createObjectURL(new Blob([bytes], { type: file.media_type }));
      return [heading, h('img', { class: 'file-image', src: imageUrl, alt: `${file.path} (${file.media_type})` })];
    }
    return [heading, cut, textPreview(file)];
  }

  /** @param {any} file @param {HTMLButtonElement} button */
  async function open(file, button) {
    button.disabled = true;
    preview.replaceChildren(h('p', { class: 'progress' }, `Reading ${file.path}…`));
    try {
      const answer = await api('GET', withQuery(`/control/api/v1/runs/${segment(runId)}/files/content`, { path: file.path }));
      preview.replaceChildren(...drawPreview(answer).filter((node) => node !== null));
    } catch (error) {
      preview.replaceChildren(errorBox(error, `Reading ${file.path}`));
    } finally {
      button.disabled = false;
    }
  }

  async function read() {
    readAgain.disabled = true;
    try {
      const answer = await api('GET', `/control/api/v1/runs/${segment(runId)}/files`);
      list.replaceChildren(
        ...[table({
          label: 'Result files',
          empty: 'No result files: run_notes.md, .research/decision.json and results/ are empty or absent.',
          rows: answer.files,
          columns: [
            { title: 'File', cell: (file) => h('code', null, file.path) },
            { title: 'Size', numeric: true, cell: (file) => h('span', { title: `${count(file.size)} bytes` }, size(file.size)) },
            { title: 'SHA-256', cell: (file) => (file.sha256 ? h('code', { title: file.sha256 }, file.sha256.slice(0, 12)) : 'too large to hash') },
            {
              title: 'Preview',
              cell: (file) =>
                file.preview === 'none'
                  ? '—'
                  : h('button', { type: 'button', 'data-key': `preview-${file.path}`, onClick: (event) => void open(file, event.currentTarget) }, 'Show'),
            },
          ],
        }),
          answer.truncated ? h('p', { class: 'notice' }, 'More files were left out: the list is bounded.') : null,
        answer.refused.length > 0 ? h('p', { class: 'hint' }, `Not listed: ${answer.refused.map((refused) => `${refused.path} (${refused.reason})`).join('; ')}`) : null,
        ].filter((node) => node !== null),
      );
    } catch (error) {
      list.replaceChildren(errorBox(error, 'Reading the result files'));
    } finally {
      readAgain.disabled = false;
      readAgain.textContent = 'Read the files again';
    }
  }

  return { el };
}
