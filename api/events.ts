import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { listAuditEventsBefore, listAuditEventsPage, type AuditEventFilters } from '../store/audit-events.ts';
import type { AppDeps } from './deps.ts';
import { errorResponses, openObject, pageBody } from '../http/responses.ts';
import { pageOf, queryInt, queryText } from '../http/validation.ts';
import { AuditEventSchema } from './answers.ts';

const filterFields = {
  entity_type: queryText(),
  entity_id: queryText(512),
  event_type: queryText(),
  search: queryText(),
};

const pagedQuery = z.object({
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

/** Opaque to clients: base64url of the last id they saw. */
const cursorField = z.preprocess(
  (value) => (value === '' ? undefined : value),
  z
    .string()
    .max(200)
    .transform((text, ctx) => {
      const decoded = decodeCursor(text);
      if (decoded === undefined) {
        ctx.addIssue({ code: 'custom', message: 'invalid cursor; pass next_cursor from a previous page' });
        return z.NEVER;
      }
      return decoded;
    })
    .optional(),
);

const cursorQuery = z.object({
  cursor: cursorField,
  page_size: queryInt({ min: 1, max: 200, default: 50 }),
  payload: payloadFilter,
  ...filterFields,
});

export function encodeCursor(id: number): string {
  return Buffer.from(JSON.stringify({ before: id })).toString('base64url');
}

function decodeCursor(text: string): number | undefined {
  try {
    const parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as { before?: unknown };
    return Number.isSafeInteger(parsed.before) && (parsed.before as number) > 0 ? (parsed.before as number) : undefined;
  } catch {
    return undefined;
  }
}

const filtersOf = (query: AuditEventFilters): AuditEventFilters => ({
  entity_type: query.entity_type,
  entity_id: query.entity_id,
  event_type: query.event_type,
  search: query.search,
  payload: query.payload,
});

const CursorPageSchema = openObject({
  items: z.array(AuditEventSchema),
  page: openObject({
    page_size: z.number().int(),
    returned: z.number().int(),
    next_cursor: z.string().nullable().describe('Pass as cursor for the next (older) page; null on the last page'),
    has_more: z.boolean(),
  }),
});

const tags = ['events'];

export async function eventRoutes(instance: FastifyInstance, deps: AppDeps): Promise<void> {
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
    response: { 200: CursorPageSchema, ...errorResponses(401, 422) },
  };
  app.get('/control/api/v1/events', { config: { auth: 'control' }, schema: byCursor }, async (request) => {
    const query = request.query;
    const rows = await listAuditEventsBefore(deps.store, filtersOf(query), {
      beforeId: query.cursor,
      limit: query.page_size + 1,
    });
    const hasMore = rows.length > query.page_size;
    const items = hasMore ? rows.slice(0, query.page_size) : rows;
    const last = items.at(-1);
    return {
      items,
      page: {
        page_size: query.page_size,
        returned: items.length,
        next_cursor: hasMore && last ? encodeCursor(last.id) : null,
        has_more: hasMore,
      },
    };
  });
}
