import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { listAuditEventsBefore, listAuditEventsPage, type AuditEventFilters } from '../../platform/store/audit-events.ts';
import type { Queryable } from '../../platform/store/store.ts';
import type { AppDeps } from '../deps.ts';
import { errorResponses, pageBody } from '../../platform/http/responses.ts';
import { pageOf, queryInt, queryText } from '../../platform/http/validation.ts';
import { AuditEventSchema } from '../audit-event-answer.ts';
import { v1ListQuery, v1Page, v1PageBody, walkFrom } from '../v1-paging.ts';
import { descending, type KeysetOrder } from '../../platform/store/keyset.ts';

const filterFields = {
  entity_type: queryText(),
  entity_id: queryText(512),
  event_type: queryText(),
  search: queryText(),
};

const pagedQuery = z.strictObject({
  page: queryInt({ min: 1, max: 1_000_000, default: 1 }),
  page_size: queryInt({ min: 1, max: 500, default: 100 }),
  ...filterFields,
});

const payloadFilter = z.preprocess(
  (value) => (value === '' ? undefined : value),
  z
    .string()
    .max(2000)
    .transform((text, ctx) => {
      try {
        const parsed: unknown = JSON.parse(text);
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
      } catch {
        // reported below
      }
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object, e.g. {"run_id":"r1"}' });
      return z.NEVER;
    })
    .optional(),
);

/** The audit log has one order in v1: newest first, by id. */
export const EVENT_ORDERS: readonly KeysetOrder[] = [{ name: '-id', columns: [descending('id', 'bigint')] }];

const cursorQuery = v1ListQuery(EVENT_ORDERS, { payload: payloadFilter, ...filterFields });

const filtersOf = (query: AuditEventFilters): AuditEventFilters => ({
  entity_type: query.entity_type,
  entity_id: query.entity_id,
  event_type: query.event_type,
  search: query.search,
  payload: query.payload,
});

const tags = ['events'];

/** One v1 page of the audit log, newest first: the rows after the walk's key, and the key of the next page. */
export async function auditEventsByCursor(reads: Queryable, filters: AuditEventFilters, walk: ReturnType<typeof walkFrom>) {
  const rows = await listAuditEventsBefore(reads, filters, {
    ...(walk.after ? { beforeId: Number(walk.after[0]) } : {}),
    limit: walk.limit + 1,
  });
  const items = rows.slice(0, walk.limit);
  const next = rows.length > walk.limit ? [String(items.at(-1)!.id)] : null;
  return v1Page({ items, next }, walk.order, walk.limit);
}

export async function eventRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const paged = {
    tags,
    summary: 'Audit log, newest first, by page',
    querystring: pagedQuery,
    response: { 200: pageBody(AuditEventSchema), ...errorResponses(401, 422) },
  };
  app.get('/control/api/events', { config: { auth: 'control' }, schema: paged }, async (request) => {
    const query = request.query;
    const { items, total } = await listAuditEventsPage(deps.store, filtersOf(query), {
      offset: (query.page - 1) * query.page_size,
      limit: query.page_size,
    });
    return pageOf(items, total, query);
  });

  const byCursor = {
    tags,
    summary: 'Audit log, newest first, by cursor, with a payload containment filter',
    querystring: cursorQuery,
    response: { 200: v1PageBody(AuditEventSchema), ...errorResponses(401, 422, 503) },
  };
  app.get('/control/api/v1/events', { config: { auth: 'control' }, schema: byCursor }, async (request) => {
    const query = request.query;
    return auditEventsByCursor(deps.store.reads, filtersOf(query), walkFrom(EVENT_ORDERS, query));
  });
}
