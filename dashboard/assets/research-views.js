// @ts-check
/** What the Research Facility's answers look like on the page: a batch, the budget, the ledger counts, one candidate. */
import { segment } from './api.js';
import { h } from './dom.js';
import { count, decimal, percent, words } from './format.js';
import { age, badge, externalLink, facts, link, table } from './ui.js';

export const DECISIONS = ['admitted', 'needs-review', 'rejected', 'merged'];
/** A candidate's four scored factors. */
export const FACTORS = ['novelty', 'feasibility', 'accessibility', 'falsifiability'];

/** A planned batch (smoke, provider or import): counts by decision and each candidate's outcome. */
export function batchView(answer) {
  return [
    answer.counts ? h('p', null, DECISIONS.map((decision, index) => [index ? ' · ' : '', `${words(decision)} ${count(answer.counts[decision] ?? 0)}`])) : null,
    answer.written ? h('p', { class: 'hint' }, `Written: ${answer.written.candidates} candidate(s), ${answer.written.admissions} decision(s), ${answer.written.sources} source(s), ${answer.written.lineage} lineage link(s).`) : null,
    table({
      label: 'Planned candidates',
      empty: 'No candidates.',
      rows: answer.results ?? [],
      columns: [
        { title: 'Candidate', cell: (row) => row.title },
        { title: 'Decision', cell: (row) => badge(row.decision) },
        { title: 'Score', numeric: true, cell: (row) => decimal(row.score) },
        { title: 'Why', cell: (row) => h('ul', { class: 'reasons' }, [...(row.reasons ?? []), ...(row.hard_failures ?? []).map((failure) => failure.message ?? String(failure))].map((reason) => h('li', null, reason))) },
      ],
    }),
  ];
}

export function budgetView(budget) {
  return facts([
    ['Budget', [badge(budget.ok ? 'ok' : 'blocked', budget.ok ? 'ok' : 'blocked'), ' ', budget.reason]],
    ['Remaining credits', budget.remaining_credits === null ? '—' : String(budget.remaining_credits)],
    ['Request window', budget.window ? [`${budget.window.remaining} of ${budget.window.limit} left, resets `, age(budget.window.resets_at)] : '—'],
    ['Requests in 24 h', count(budget.requests_last_24h)],
  ]);
}

export function countsView({ facility, quality }) {
  const counts = facility.counts;
  return [
    h(
      'ul',
      { class: 'stat-row' },
      [
        ['Sources', counts.sources],
        ['Candidates', counts.candidates],
        ['Admitted', counts.admissions_by_decision?.admitted],
        ['Needs review', counts.admissions_by_decision?.['needs-review']],
        ['Rejected', counts.admissions_by_decision?.rejected],
        ['Merged', counts.admissions_by_decision?.merged],
        ['Promoted to the queue', counts.candidates_queue_admitted],
        ['Projects', counts.projects],
      ].map(([title, value]) => h('li', { class: 'stat' }, h('span', { class: 'stat-value' }, count(/** @type {number} */ (value))), h('span', { class: 'stat-title' }, title))),
    ),
    quality
      ? h(
          'p',
          { class: 'hint' },
          `Admission rate ${percent(quality.rates.admission_rate)} · merge rate ${percent(quality.rates.merge_rate)} · promotion rate ${percent(quality.rates.promotion_rate)} · promoted runs positive ${percent(quality.rates.promoted_run_positive_rate)}. Admitted at score ≥ ${facility.min_admission_score}, needs review at ≥ ${facility.needs_review_min_score} (planner ${facility.planner_version}).`,
        )
      : null,
  ];
}

function breakdownView(candidate, admission) {
  const breakdown = admission?.score_breakdown;
  return [
    facts([
      ['Score', [h('strong', null, decimal(candidate.score)), ' ', badge(candidate.decision)]],
      ...FACTORS.map((factor) => /** @type {[string, string]} */ ([words(factor), candidate[factor] === null || candidate[factor] === undefined ? '—' : `${candidate[factor]} / 10`])),
      ...(breakdown
        ? /** @type {[string, string][]} */ ([
            ['Weighted', decimal(breakdown.weighted)],
            ['Mode bonus', `${decimal(breakdown.mode_bonus)}${breakdown.mode_bonus_reason ? ` (${breakdown.mode_bonus_reason})` : ''}`],
          ])
        : []),
    ]),
    admission?.reasons?.length ? [h('h4', null, 'Reasons'), h('ul', { class: 'reasons' }, admission.reasons.map((reason) => h('li', null, reason)))] : null,
    admission?.hard_failures?.length ? [h('h4', null, 'Hard failures'), h('ul', { class: 'reasons' }, admission.hard_failures.map((failure) => h('li', null, failure.message ?? JSON.stringify(failure))))] : null,
  ];
}

export function candidateDetailView(candidate) {
  // Newest first: the decision that stands.
  const admission = candidate.admissions?.[0];
  return [
    h('h4', { class: 'candidate-title' }, candidate.title),
    h('p', { class: 'hint' }, `${candidate.candidate_id} · ${words(candidate.generation_mode)} · batch ${candidate.batch_id}`),
    h(
      'div',
      { class: 'columns' },
      h(
        'div',
        null,
        facts(
          /** @type {[string, string][]} */ (
            [
              ['Hypothesis', candidate.hypothesis],
              ['Mechanism', candidate.mechanism],
              ['Baseline to beat', candidate.baseline_to_beat],
              ['Success threshold', candidate.success_threshold],
              ['Kill condition', candidate.kill_condition],
              ['Novelty comparison', candidate.novelty_comparison],
              ['Runtime', words(candidate.estimated_runtime_class)],
              ['Dedupe key', candidate.dedupe_key],
            ].map(([name, value]) => [name, value ?? '—'])
          ),
        ),
        candidate.source_urls?.length ? [h('h4', null, 'Sources'), h('ul', { class: 'plain' }, candidate.source_urls.map((url) => h('li', null, externalLink(url, url))))] : null,
      ),
      h('div', null, breakdownView(candidate, admission)),
    ),
    h('h4', null, 'Lineage'),
    table({
      label: 'Lineage of the candidate',
      empty: 'No lineage links.',
      rows: candidate.lineage ?? [],
      columns: [
        { title: 'From', cell: (row) => `${words(row.from_kind)} ${row.from_id}` },
        { title: 'Relation', cell: (row) => words(row.relation) },
        { title: 'To', cell: (row) => (row.to_kind === 'run' ? link(`#/runs/${segment(row.to_id)}`, `run ${row.to_id}`) : `${words(row.to_kind)} ${row.to_id}`) },
        { title: 'When', cell: (row) => age(row.created_at) },
      ],
    }),
  ];
}
