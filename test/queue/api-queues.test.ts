import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRunOwned, type QueueStatus } from '../../capabilities/runs/domain/queue-status.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;

const ROWS: { id: string; status: QueueStatus; flagged?: boolean; priority?: number; target?: string }[] = [
  { id: 'q-alpha', status: 'queued', priority: 10 },
  { id: 'q-bravo', status: 'queued', flagged: true, priority: 20 },
  { id: 'q-charlie', status: 'queued', priority: 5, target: 'gpu-box' },
  { id: 'r-delta', status: 'running' },
  { id: 'r-echo', status: 'awaiting_wake' },
  { id: 'b-foxtrot', status: 'blocked' },
  { id: 'b-golf', status: 'dispatch_error' },
  { id: 'p-hotel', status: 'paused' },
  { id: 'c-india', status: 'completed' },
  { id: 'c-juliet', status: 'canceled' },
];

beforeAll(async () => {
  t = await startTestApp();
  await t.store.transaction(async (tx) => {
    for (const row of ROWS) {
      await insertProject(tx, { project_id: row.id, project_name: `Project ${row.id}`, project_dir: row.id });
      await insertQueueItem(tx, {
        project_id: row.id,
        project_name: `Project ${row.id}`,
        status: row.status,
        ...(isRunOwned(row.status) ? { lane: row.id } : {}),
        manual_review_required: row.flagged ?? false,
        dispatch_priority: row.priority ?? 50,
        machine_target: row.target ?? null,
      });
    }
  });
});
afterAll(async () => t.close());

const list = async (path: string) => {
  const response = await t.app.inject({ method: 'GET', url: `/control/api/queues/${path}`, headers: t.auth });
  return { status: response.statusCode, body: response.json() as { items: { project_id: string }[]; total: number; page: number; page_size: number; has_more: boolean; detail?: unknown } };
};
const ids = (body: { items: { project_id: string }[] }) => body.items.map((item) => item.project_id);

describe('GET /control/api/queues/{queue}', () => {
  it.each([
    ['queued', ['q-charlie', 'q-alpha', 'q-bravo']],
    ['active', ['r-delta', 'r-echo']],
    ['blocked', ['q-bravo', 'b-foxtrot', 'b-golf']],
    ['paused', ['p-hotel']],
    ['completed', ['c-india', 'c-juliet']],
  ])('lists the %s group in dispatch order (a flagged queued row is also blocked)', async (group, expected) => {
    const { status, body } = await list(group);
    expect(status).toBe(200);
    expect(ids(body).sort()).toEqual([...expected].sort());
    expect(body.total).toBe(expected.length);
    if (group === 'queued') expect(ids(body)).toEqual(expected);
  });

  it('pages with page and page_size and keeps the total past the last page', async () => {
    const first = await list('all?page=1&page_size=4&sort=project_id');
    expect(first.body).toMatchObject({ page: 1, page_size: 4, total: 10, has_more: true });
    expect(ids(first.body)).toEqual(['b-foxtrot', 'b-golf', 'c-india', 'c-juliet']);
    const last = await list('all?page=3&page_size=4&sort=project_id');
    expect(last.body).toMatchObject({ total: 10, has_more: false });
    expect(ids(last.body)).toEqual(['r-delta', 'r-echo']);
    const beyond = await list('all?page=9&page_size=4');
    expect(beyond.body).toMatchObject({ items: [], total: 10, has_more: false });
  });

  it('filters by exact status and by a search over string fields, and sorts descending with "-"', async () => {
    expect(ids((await list('all?status=awaiting_wake')).body)).toEqual(['r-echo']);
    expect(ids((await list('all?search=GPU-BOX')).body)).toEqual(['q-charlie']);
    expect(ids((await list('completed?sort=-project_id')).body)).toEqual(['c-juliet', 'c-india']);
    expect((await list('all?search=100%25')).body.total).toBe(0);
  });

  it.each([
    ['an unknown group', 'someday', ['path', 'queue']],
    ['an unknown sort column', 'all?sort=-secret', ['query', 'sort']],
    ['an unknown status', 'all?status=sleeping', ['query', 'status']],
    ['page_size over 500', 'all?page_size=501', ['query', 'page_size']],
    ['page 0', 'all?page=0', ['query', 'page']],
  ])('answers 422 for %s', async (_name, path, loc) => {
    const { status, body } = await list(path);
    expect(status).toBe(422);
    expect((body.detail as { loc: unknown[] }[])[0]!.loc).toEqual(loc);
  });
});
