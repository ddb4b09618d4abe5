import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;

interface EventBody {
  id: number;
  entity_type: string;
  entity_id: string;
  event_type: string;
  payload: Record<string, unknown>;
  created_at: string;
}

beforeAll(async () => {
  t = await startTestApp();
  await t.store.transaction(async (tx) => {
    for (let index = 0; index < 30; index += 1) {
      const isRun = index % 3 === 0;
      await appendAuditEvent(tx, {
        entity_type: isRun ? 'run' : 'queue_item',
        entity_id: `project-${index % 5}`,
        event_type: isRun ? 'run.state_changed' : 'queue_item.requeued',
        payload: { seq: index, lane: index % 2 === 0 ? 'gpu' : 'cpu' },
      });
    }
  });
});
afterAll(async () => t.close());

const get = async (url: string) => {
  const response = await t.app.inject({ method: 'GET', url, headers: t.auth });
  return { status: response.statusCode, body: response.json() };
};

describe('GET /control/api/events', () => {
  it('returns the paginated body, newest first, with default page size 100', async () => {
    const { status, body } = await get('/control/api/events');
    expect(status).toBe(200);
    expect(body).toMatchObject({ page: 1, page_size: 100, total: 30, has_more: false });
    const seqs = (body.items as EventBody[]).map((event) => event.payload.seq);
    expect(seqs).toEqual([...Array(30).keys()].reverse());
    expect(body.items[0]).toEqual({
      id: expect.any(Number),
      entity_type: 'queue_item',
      entity_id: 'project-4',
      event_type: 'queue_item.requeued',
      payload: { seq: 29, lane: 'cpu' },
      idempotency_key: null,
      actor: null,
      request_id: null,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
  });

  it('pages with page and page_size and reports has_more', async () => {
    const first = await get('/control/api/events?page=1&page_size=12');
    const third = await get('/control/api/events?page=3&page_size=12');
    expect(first.body).toMatchObject({ page: 1, page_size: 12, total: 30, has_more: true });
    expect(first.body.items).toHaveLength(12);
    expect(third.body).toMatchObject({ page: 3, has_more: false });
    const pastTheEnd = await get('/control/api/events?page=9&page_size=12');
    expect(pastTheEnd.body).toMatchObject({ items: [], page: 9, total: 30, has_more: false });
    expect((third.body.items as EventBody[]).map((event) => event.payload.seq)).toEqual([5, 4, 3, 2, 1, 0]);
  });

  it('filters by entity_type, entity_id, event_type and search together', async () => {
    const runs = await get('/control/api/events?entity_type=run');
    expect(runs.body.total).toBe(10);
    const project = await get('/control/api/events?entity_id=project-0&event_type=run.state_changed');
    expect((project.body.items as EventBody[]).map((event) => event.payload.seq)).toEqual([15, 0]);
    const search = await get('/control/api/events?search=REQUEUED&entity_id=project-1');
    expect(search.body.total).toBe(4);
    const nothing = await get('/control/api/events?search=no-such-text');
    expect(nothing.body).toMatchObject({ items: [], total: 0, has_more: false });
  });

  it('enforces the page and page_size bounds', async () => {
    expect((await get('/control/api/events?page_size=500')).status).toBe(200);
    expect((await get('/control/api/events?page_size=1')).body.items).toHaveLength(1);
    for (const query of ['page_size=0', 'page_size=501', 'page=0', 'page=-1', 'page=abc', 'page_size=1.5']) {
      const { status, body } = await get(`/control/api/events?${query}`);
      expect(status, query).toBe(422);
      expect(body.detail[0].loc[0]).toBe('query');
    }
  });
});

describe('GET /control/api/v1/events', () => {
  it('walks every event newest first with an opaque cursor', async () => {
    const seen: number[] = [];
    let url = '/control/api/v1/events?page_size=7';
    for (let guard = 0; guard < 10; guard += 1) {
      const { status, body } = await get(url);
      expect(status).toBe(200);
      seen.push(...(body.items as EventBody[]).map((event) => event.payload.seq as number));
      expect(body.page.returned).toBe(body.items.length);
      if (!body.page.has_more) {
        expect(body.page.next_cursor).toBeNull();
        break;
      }
      url = `/control/api/v1/events?page_size=7&cursor=${body.page.next_cursor}`;
    }
    expect(seen).toEqual([...Array(30).keys()].reverse());
  });

  it('defaults to 50 per page and caps page_size at 200', async () => {
    expect((await get('/control/api/v1/events')).body.page.page_size).toBe(50);
    expect((await get('/control/api/v1/events?page_size=200')).status).toBe(200);
    expect((await get('/control/api/v1/events?page_size=201')).status).toBe(422);
  });

  it('filters by payload containment and by search', async () => {
    const gpuRuns = await get(`/control/api/v1/events?entity_type=run&payload=${encodeURIComponent('{"lane":"gpu"}')}`);
    expect((gpuRuns.body.items as EventBody[]).map((event) => event.payload.seq)).toEqual([24, 18, 12, 6, 0]);
    const search = await get('/control/api/v1/events?search=state_changed&page_size=3');
    expect(search.body.page).toMatchObject({ returned: 3, has_more: true });
  });

  it('refuses a malformed or edited cursor, or a malformed payload filter, with 422', async () => {
    const cursor: string = (await get('/control/api/v1/events?page_size=2')).body.page.next_cursor;
    const edited = `${cursor.slice(0, 4)}${cursor[4] === 'A' ? 'B' : 'A'}${cursor.slice(5)}`;
    for (const query of ['cursor=not-a-cursor', `cursor=${Buffer.from('{"before":-1}').toString('base64url')}`, `cursor=${edited}`, 'payload=[1]', 'payload={oops']) {
      const { status, body } = await get(`/control/api/v1/events?${query}`);
      expect(status, query).toBe(422);
      expect(body.detail[0].loc).toEqual(['query', query.split('=')[0]]);
    }
  });
});
