// @ts-check
/**
 * The dashboard's entry point: signing in and out, the panel navigation (the URL fragment names the panel, e.g.
 * `#/runs/<run_id>`; it never holds a credential) and polling. The interface has no subscription endpoint, so the
 * panel on screen asks its read models again every few seconds, and not at all while the tab is hidden.
 */
import { ApiError, onSignedOut, resumeSession, signIn, signOut } from './api.js';
import { h, swap } from './dom.js';
import { errorBox, refreshAges } from './ui.js';
import { createOverviewPanel } from './panel-overview.js';
import { createQueuePanel } from './panel-queue.js';
import { createRunsPanel } from './panel-runs.js';
import { createPapersPanel } from './panel-papers.js';
import { createResearchPanel } from './panel-research.js';
import { createEventsPanel } from './panel-events.js';

/** @typedef {{ el: HTMLElement, refresh: () => Promise<void> }} Panel */
/** @typedef {{ params: string[], navigate: (route: string) => void }} PanelContext */

/** How often the panel on screen reads again. */
const POLL_MS = 5000;
/**
 * After this long without a click or a key the tab stops polling: an unattended tab must not keep its session alive,
 * which ends after 30 idle minutes (decisions: the session's idle timeout).
 */
const IDLE_AFTER_MS = 25 * 60 * 1000;
/** Panels kept (with their filters, pages and any command still running) for going back to them. */
const KEPT_PANELS = 12;

/** @type {{ id: string, title: string, create: (context: PanelContext) => Panel }[]} */
const PANELS = [
  { id: 'overview', title: 'Overview', create: createOverviewPanel },
  { id: 'queue', title: 'Queue', create: createQueuePanel },
  { id: 'runs', title: 'Lanes and runs', create: createRunsPanel },
  { id: 'papers', title: 'Papers', create: createPapersPanel },
  { id: 'research', title: 'Research Facility', create: createResearchPanel },
  { id: 'events', title: 'Events', create: createEventsPanel },
];

const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const nav = /** @type {HTMLElement} */ (document.getElementById('nav'));
const signOutButton = /** @type {HTMLButtonElement} */ (document.getElementById('sign-out'));

/** @type {{ key: string, panel: Panel } | null} */
let current = null;
/** Panels by route, the most recently shown last. @type {Map<string, Panel>} */
const kept = new Map();
let signedIn = false;
let refreshing = false;
let refreshAgain = false;
let lastInput = Date.now();
/** Where a refresh that failed unexpectedly says so; cleared by the next one that works. */
const refreshError = h('div');
const idleNotice = h(
  'p',
  { class: 'notice', role: 'status', hidden: true },
  'Updates paused: nothing was clicked or typed for 25 minutes, so this tab no longer keeps the session alive. Click or press a key to go on.',
);

function parseRoute() {
  const [id = 'overview', ...params] = location.hash.replace(/^#\/?/, '').split('/').map((part) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return part;
    }
  });
  const panel = PANELS.find((candidate) => candidate.id === id) ?? PANELS[0];
  return { panel: /** @type {(typeof PANELS)[number]} */ (panel), params: params.filter(Boolean) };
}

function drawNav(activeId) {
  swap(
    nav,
    h(
      'ul',
      null,
      PANELS.map((panel) =>
        h('li', null, h('a', { href: `#/${panel.id}`, 'aria-current': panel.id === activeId ? 'page' : undefined, 'data-key': `nav-${panel.id}` }, panel.title)),
      ),
    ),
  );
}

const isIdle = () => Date.now() - lastInput > IDLE_AFTER_MS;

/** Reads the panel on screen again; a call while one is on its way runs once more after it (the panel may have changed). */
async function refreshCurrent() {
  if (!current || !signedIn) return;
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = true;
  const shown = current;
  try {
    await shown.panel.refresh();
    if (current === shown) refreshError.replaceChildren();
  } catch (error) {
    // A panel shows its own read errors in place; this catches what it did not expect, so polling goes on.
    if (current === shown) refreshError.replaceChildren(errorBox(error, 'Refreshing the panel'));
  } finally {
    refreshing = false;
    if (refreshAgain) {
      refreshAgain = false;
      void refreshCurrent();
    }
  }
}

/** The panel for a route: the one kept from an earlier visit, or a new one. @param {(typeof PANELS)[number]} spec @param {string[]} params @param {string} key */
function panelFor(spec, params, key) {
  const panel = kept.get(key) ?? spec.create({ params, navigate: (route) => { location.hash = route; } });
  kept.delete(key);
  kept.set(key, panel);
  for (const old of kept.keys()) {
    if (kept.size <= KEPT_PANELS) break;
    kept.delete(old);
  }
  return panel;
}

/** @param {{ focus: boolean }} options */
function showRoute(options) {
  if (!signedIn) return;
  const { panel, params } = parseRoute();
  const key = `${panel.id}/${params.join('/')}`;
  if (current?.key === key) return;
  const shown = panelFor(panel, params, key);
  current = { key, panel: shown };
  document.title = `${panel.title} — Research control plane`;
  drawNav(panel.id);
  refreshError.replaceChildren();
  main.replaceChildren(idleNotice, refreshError, shown.el);
  if (options.focus) main.focus();
  void refreshCurrent();
}

function showSignIn(message) {
  signedIn = false;
  current = null;
  // Nothing of the last session stays on the page.
  kept.clear();
  nav.hidden = true;
  signOutButton.hidden = true;
  document.title = 'Sign in — Research control plane';
  const input = /** @type {HTMLInputElement} */ (
    h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', 'aria-describedby': 'token-hint' })
  );
  const status = h('div', { id: 'sign-in-status' }, message ? h('p', { class: 'notice', role: 'status' }, message) : null);
  const button = /** @type {HTMLButtonElement} */ (h('button', { type: 'submit', class: 'primary' }, 'Sign in'));
  const form = h(
    'form',
    { class: 'sign-in', 'aria-labelledby': 'sign-in-title' },
    h('h2', { id: 'sign-in-title' }, 'Sign in'),
    h('label', { for: 'token' }, 'Control API token'),
    input,
    h(
      'p',
      { id: 'token-hint', class: 'hint' },
      'The control_api_bearer_token of this control plane (npm start prints it on the first run). It is exchanged for an HttpOnly session cookie and kept nowhere in this browser.',
    ),
    button,
    status,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (button.disabled) return;
    const token = input.value;
    input.value = '';
    button.disabled = true;
    try {
      await signIn(token);
      showSignedIn({ focus: true });
    } catch (error) {
      const what = error instanceof ApiError && error.status === 401 ? 'Sign-in (the token was not accepted)' : 'Sign-in';
      status.replaceChildren(errorBox(error, what));
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  main.replaceChildren(form);
  input.focus();
}

/** @param {{ focus: boolean }} options */
function showSignedIn(options) {
  signedIn = true;
  nav.hidden = false;
  signOutButton.hidden = false;
  current = null;
  showRoute(options);
}

signOutButton.addEventListener('click', async () => {
  signOutButton.disabled = true;
  try {
    await signOut();
    showSignIn('Signed out.');
  } catch (error) {
    // 401: the session had ended already. Anything else: the cookie may still be good, so say so and stay.
    if (error instanceof ApiError && error.status === 401) showSignIn('Signed out.');
    else refreshError.replaceChildren(errorBox(error, 'Signing out'));
  } finally {
    signOutButton.disabled = false;
  }
});

onSignedOut(() => {
  if (signedIn) showSignIn('The session ended (signed out elsewhere, idle for 30 minutes, or older than 12 hours): sign in again.');
});

// The skip link moves focus without touching the URL fragment, which names the panel.
document.querySelector('.skip-link')?.addEventListener('click', (event) => {
  event.preventDefault();
  main.focus();
});
window.addEventListener('hashchange', () => {
  if (location.hash && !location.hash.startsWith('#/')) return;
  showRoute({ focus: true });
});
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && !isIdle()) void refreshCurrent();
});
for (const type of ['pointerdown', 'keydown', 'wheel', 'touchstart']) {
  window.addEventListener(
    type,
    () => {
      const wasIdle = isIdle();
      lastInput = Date.now();
      if (wasIdle) {
        idleNotice.hidden = true;
        void refreshCurrent();
      }
    },
    { capture: true, passive: true },
  );
}
window.setInterval(() => {
  if (document.visibilityState !== 'visible') return;
  if (isIdle()) {
    idleNotice.hidden = false;
    return;
  }
  refreshAges();
  void refreshCurrent();
}, POLL_MS);

(async () => {
  // The shell tells whether the browser holds a session cookie; without one there is no session to pick up.
  const cookie = document.querySelector('meta[name="rcp-session-cookie"]');
  if (cookie?.getAttribute('content') !== 'present') {
    showSignIn();
    return;
  }
  try {
    if (await resumeSession()) showSignedIn({ focus: false });
    else showSignIn();
  } catch (error) {
    showSignIn();
    main.prepend(errorBox(error, 'Checking the session'));
  }
})();
