// @ts-check
/** Events: the append-only audit log, newest first, filtered and paged by cursor. */
import { api, segment, withQuery } from './api.js';
import { h, Region } from './dom.js';
import { compactJson, when } from './format.js';
import { card, CursorPager, fillPage, link } from './ui.js';
import { filterBar } from './ui-forms.js';

/** @typedef {import('./app.js').PanelContext} PanelContext */

/** Where an event's entity is shown in the dashboard, when it has a page of its own. */
function entityLink(event) {
  const text = `${event.entity_type} ${event.entity_id}`;
  if (event.entity_type === 'run') return link(`#/runs/${segment(event.entity_id)}`, text);
  if (event.entity_type === 'paper' || event.entity_type === 'paper_review') return link(`#/papers/${segment(event.entity_id)}`, text);
  return text;
}

/** @param {PanelContext} _context */
export function createEventsPanel(_context) {
  const filters = { entity_type: '', entity_id: '', event_type: '', search: '' };
  const pager = new CursorPager(() => void refresh());
  const list = new Region();

  const bar = filterBar(
    filters,
    [
      { name: 'entity_type', label: 'Entity type', search: '', hint: 'e.g. run, queue_item, paper' },
      { name: 'entity_id', label: 'Entity id', search: '' },
      { name: 'event_type', label: 'Event type', search: '', hint: 'e.g. run.dispatched' },
      { name: 'search', label: 'Search', search: '' },
    ],
    () => pager.restart(),
  );

  const el = h(
    'div',
    { class: 'panel' },
    h('h2', null, 'Events'),
    card(
      'Audit log',
      h('p', { class: 'muted' }, 'Every command appends its event in the same transaction as its change; nothing here is ever edited or deleted.'),
      bar,
      list.el,
    ),
  );

  async function refresh() {
    await fillPage(list, pager, {
      what: 'Reading the events',
      read: () => api('GET', withQuery('/control/api/v1/events', { ...filters, cursor: pager.cursor, page_size: 50 })),
      pages: 'Event pages',
      drawnWith: filters,
      table: {
        label: 'Audit events',
        empty: Object.values(filters).some(Boolean) ? 'No event matches these filters.' : 'No events yet.',
        columns: [
          { title: 'When', cell: (event) => when(event.created_at) },
          { title: 'Event', cell: (event) => h('code', null, event.event_type) },
          { title: 'Entity', cell: entityLink },
          { title: 'By', cell: (event) => event.actor ?? '—' },
          { title: 'Payload', cell: (event) => h('details', { class: 'json' }, h('summary', null, compactJson(event.payload, 80)), h('pre', null, JSON.stringify(event.payload, null, 2))) },
        ],
      },
    });
  }

  return { el, refresh };
}
