// @ts-check
/** Turning API values into words. Pure functions of their arguments (and the clock, for ages). */

/** `dispatch_error` → `dispatch error`. @param {unknown} value */
export const words = (value) => (value === null || value === undefined || value === '' ? '—' : String(value).replaceAll('_', ' '));

/** @param {number | null | undefined} value */
export const count = (value) => (typeof value === 'number' ? value.toLocaleString('en') : '—');

/** @param {number | null | undefined} value @param {number} [digits] */
export const decimal = (value, digits = 1) => (typeof value === 'number' ? value.toFixed(digits) : '—');

/** @param {number | null | undefined} value 0–1 */
export const percent = (value) => (typeof value === 'number' ? `${(value * 100).toFixed(0)} %` : '—');

/** How long ago an ISO 8601 time was, in the largest whole unit: `45 s ago`, `3 min ago`, `2 h ago`, `4 d ago`. */
export function ago(/** @type {string | null | undefined} */ iso, now = Date.now()) {
  if (!iso) return '—';
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (Number.isNaN(seconds)) return '—';
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86_400)} d ago`;
}

/** A time as the browser's locale writes it. @param {string | null | undefined} iso */
export function when(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

/** A duration in seconds as `42 s` or `3 min 5 s`. @param {number} seconds */
export function duration(seconds) {
  const whole = Math.floor(seconds);
  return whole < 60 ? `${whole} s` : `${Math.floor(whole / 60)} min ${whole % 60} s`;
}

/** JSON on one line, cut to `max` characters. @param {unknown} value */
export function compactJson(value, max = 160) {
  const text = JSON.stringify(value) ?? '';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The tone a status shows in: what needs a person is bad, what runs is busy, what finished well is good. */
const TONES = {
  bad: ['blocked', 'needs_review', 'dispatch_error', 'gate_error', 'gate_timeout', 'question_pending', 'rejected', 'human_review_required', 'BLOCKED', 'fail', 'error', 'cancelled'],
  warn: ['needs-review', 'changes_requested', 'accepted_risk', 'negative', 'inconclusive', 'paused', 'usage_limited', 'waiting_for_quiet_window', 'waiting_for_process_exit', 'pending_idle_gate', 'finished_pending_gate'],
  busy: ['dispatching', 'running', 'awaiting_wake', 'wake_received', 'reconciling', 'prepared', 'wake_ready', 'session_finished_ready', 'draft_generating', 'publication_generating', 'in_review', 'triage_ready', 'draft_review'],
  good: ['completed', 'reconciled', 'READY', 'pass', 'admitted', 'finalized', 'approved_for_finalization', 'publication_draft', 'finalize_positive', 'finished_ready', 'ok', 'drafted', 'promoted', 'live_dispatch', 'imported'],
  quiet: ['canceled', 'archived', 'not_applicable', 'merged', 'pending', 'unreviewed', 'noop'],
};

/** @param {unknown} status @returns {'bad' | 'warn' | 'busy' | 'good' | 'quiet' | 'neutral'} */
export function toneOf(status) {
  for (const [tone, statuses] of Object.entries(TONES)) {
    if (statuses.includes(String(status))) return /** @type {'bad' | 'warn' | 'busy' | 'good' | 'quiet'} */ (tone);
  }
  return 'neutral';
}
