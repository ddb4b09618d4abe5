// @ts-check
/**
 * A run's transcript on its page, live (GET /control/api/v1/runs/{run_id}/transcript/stream, server-sent events): the
 * agent's messages, its tool calls and their output, its token usage and its lifecycle, as the worker gate pushes them.
 * Every text is the agent's and is shown as text (dom.js builds Text nodes). The stream reconnects by itself after a
 * drop and resumes after the last entry shown (EventSource sends it as Last-Event-ID); a fresh connection asks with
 * `after`. It is open only while the page shows the run.
 */
import { segment, withQuery } from './api.js';
import { h } from './dom.js';
import { when } from './format.js';
import { card } from './ui.js';

/** The page keeps the latest entries only: a run may have thousands, the API has them all. */
const MAX_SHOWN = 2000;
const RECONNECT_MS = 3000;

const KIND_LABELS = { message: 'Agent', tool_call: 'Tool call', tool_output: 'Output', usage: 'Tokens', lifecycle: 'Lifecycle' };

/** @param {string} runId */
export function createRunTranscript(runId) {
  const log = h('ol', { class: 'transcript', 'data-key': 'transcript', 'aria-label': 'Transcript entries' });
  const status = h('p', { class: 'muted', role: 'status', 'data-key': 'transcript-status' }, 'Connecting…');
  const el = card('Transcript', status, log);
  /** @type {EventSource | null} */
  let source = null;
  let lastSeq = 0;
  let ended = false;
  /** @type {number | undefined} */
  let retry;
  /** @type {number | undefined} */
  let watching;

  /** @param {any} entry */
  function add(entry) {
    if (entry.seq <= lastSeq) return;
    lastSeq = entry.seq;
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
    log.append(
      h(
        'li',
        { class: ['transcript-entry', `transcript-${entry.kind}`], 'data-seq': String(entry.seq) },
        h('span', { class: 'transcript-kind' }, KIND_LABELS[entry.kind] ?? entry.kind),
        entry.tool ? [' ', h('code', null, entry.tool)] : null,
        h('time', { class: 'muted', datetime: entry.at, title: when(entry.at) }, ` ${new Date(entry.at).toLocaleTimeString()}`),
        h('pre', { class: 'transcript-text' }, entry.text),
      ),
    );
    while (log.childElementCount > MAX_SHOWN) log.firstElementChild?.remove();
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  function close() {
    source?.close();
    source = null;
    window.clearInterval(watching);
  }

  /** The page went elsewhere: the stream is closed, and opened again when the run is shown again. */
  const stillShown = () => {
    if (el.isConnected) return true;
    close();
    return false;
  };

  function open() {
    if (source || ended) return;
    clearTimeout(retry);
    const stream = new EventSource(withQuery(`/control/api/v1/runs/${segment(runId)}/transcript/stream`, { after: lastSeq }));
    source = stream;
    // Leaving the page closes the stream, even when no entry comes to notice it.
    watching = window.setInterval(stillShown, 5000);
    stream.addEventListener('open', () => status.replaceChildren('Live: new entries appear as the agent works.'));
    stream.addEventListener('entry', (event) => {
      if (stillShown()) add(JSON.parse(/** @type {MessageEvent} */ (event).data));
    });
    stream.addEventListener('end', () => {
      ended = true;
      close();
      status.replaceChildren(lastSeq === 0 ? 'The run is finished; no transcript was recorded for it.' : 'The run is finished: its whole transcript is shown.');
    });
    stream.addEventListener('error', () => {
      if (!stillShown() || ended) return;
      // CONNECTING: the browser reconnects by itself. CLOSED: it gave up (an answer other than a stream); asked again later.
      status.replaceChildren('Disconnected: reconnecting…');
      if (stream.readyState === EventSource.CLOSED) {
        close();
        retry = window.setTimeout(() => el.isConnected && open(), RECONNECT_MS);
      }
    });
  }

  return { el, open };
}
