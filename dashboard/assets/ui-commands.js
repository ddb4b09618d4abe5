// @ts-check
/** The dashboard's commands: a button's call with its progress and outcome, dry-run-first commands, and confirmed ones. */
import { newKey } from './api.js';
import { h } from './dom.js';
import { duration } from './format.js';
import { card, errorBox, uniqueId } from './ui.js';

/** @typedef {import('./dom.js').Child} Child */


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
 *   live: (input: any, key: string, preview: any) => Promise<any>,
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
        const answer = await this.spec.live(previewed.input, previewed.key, previewed.answer);
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
