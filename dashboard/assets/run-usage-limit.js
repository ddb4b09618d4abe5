// @ts-check
/**
 * A run waiting out the model's usage limit, on the run page: when its session resumes by itself, when the limit
 * resets as the tool said, and a button that resumes it now (docs/runs.md#waiting-out-a-usage-limit).
 */
import { ACTOR, api, newKey, segment } from './api.js';
import { h } from './dom.js';
import { when } from './format.js';
import { badge, card, facts } from './ui.js';
import { runCommand } from './ui-commands.js';

/** How many usage limits the run has hit: each is a `usage_limited` transition. @param {any} run */
const limitsHit = (run) => run.transitions.filter((row) => row.transition === 'usage_limited').length;

/**
 * The run page's usage-limit card: one request key per limit, so that a second click (or a try again after an error)
 * asks once.
 * @param {string} runId
 * @param {() => Promise<void>} refresh redraws the run page once the request was sent
 */
export function createUsageLimit(runId, refresh) {
  const output = h('div', { class: 'command-output' });
  /** @type {{ limit: number, key: string } | null} */
  let request = null;

  /** The card while the run waits; null otherwise. @param {any} answer the run detail */
  function usageLimitCard(answer) {
    const run = answer.run;
    if (run.state !== 'usage_limited' || !run.usage_limit) return null;
    const limit = limitsHit(run);
    if (request === null || request.limit !== limit) request = { limit, key: newKey() };
    const key = request.key;
    const resume = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'primary', 'data-key': 'resume-now' }, 'Resume now'));
    resume.addEventListener('click', () =>
      void runCommand(resume, output, () => api('POST', `/control/api/v1/runs/${segment(runId)}/resume`, { requested_by: ACTOR, idempotency_key: key }), {
        what: 'Resuming the run',
        progress: 'Resuming the run…',
        shown: () => "Resume requested: the run's workflow resumes the agent's session now.",
        done: () => void refresh(),
      }),
    );
    return card(
      'Usage limit',
      h(
        'p',
        null,
        badge('usage_limited', 'waiting for the limit'),
        run.usage_limit.holds_slot === false
          ? " The model refused for its usage limit: the wait is long, so the run's lane is free for other items meanwhile. The run takes it back, and the agent's session resumes by itself."
          : " The model refused for its usage limit: the run keeps its lane, and the agent's session resumes by itself.",
      ),
      facts([
        ['Resumes at', when(run.usage_limit.resumes_at)],
        ['Limit resets', run.usage_limit.resets_at ? when(run.usage_limit.resets_at) : 'the tool named no time'],
        ['Limits hit', String(limit)],
      ]),
      h('div', { class: 'actions' }, resume),
      output,
    );
  }

  return { usageLimitCard };
}
