// @ts-check
/** Why nothing moves (GET /control/api/v1/why): what holds each queued item, each lane and each active run, in words. */
import { segment } from './api.js';
import { h } from './dom.js';
import { words } from './format.js';
import { badge, link, table } from './ui.js';

/** The kinds that need a person, and those that mean it goes. */
const FOR_A_PERSON = new Set(['question', 'overdue', 'flagged', 'preflight_failing', 'no_lane', 'does_not_fit']);
const GOES = new Set(['dispatchable', 'ready']);

/** @param {string} kind */
const kindBadge = (kind) => badge(GOES.has(kind) ? 'ok' : FOR_A_PERSON.has(kind) ? 'blocked' : 'paused', words(kind));

/** @param {any} why the answer of GET /control/api/v1/why, without its checked_at */
export function whyView(why) {
  return [
    h('p', { class: 'verdict', 'data-key': 'why-summary' }, why.summary),
    why.items.length > 0
      ? table({
          label: 'Queued items, in dispatch order',
          empty: '',
          rows: why.items,
          columns: [
            { title: 'Item', cell: (item) => [link(`#/queue/all/${segment(item.project_id)}`, item.project_name), h('span', { class: 'hint block' }, item.project_id)] },
            { title: 'Why', cell: (item) => kindBadge(item.kind) },
            { title: 'Reason', cell: (item) => item.reason },
          ],
        })
      : null,
    table({
      label: 'Lanes',
      empty: 'No worker lane is configured.',
      rows: why.lanes,
      columns: [
        { title: 'Lane', cell: (lane) => [lane.lane, lane.lane !== lane.machine_target ? h('span', { class: 'hint block' }, lane.machine_target) : null] },
        { title: 'Why', cell: (lane) => kindBadge(lane.kind) },
        { title: 'Reason', cell: (lane) => lane.reason },
      ],
    }),
    why.runs.length > 0
      ? table({
          label: 'Active runs',
          empty: '',
          rows: why.runs,
          columns: [
            { title: 'Run', cell: (run) => [link(`#/runs/${segment(run.run_id)}`, run.run_id), h('span', { class: 'hint block' }, words(run.state))] },
            { title: 'Why', cell: (run) => kindBadge(run.kind) },
            { title: 'Reason', cell: (run) => run.reason },
          ],
        })
      : null,
  ];
}
