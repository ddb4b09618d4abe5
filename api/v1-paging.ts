import { z } from 'zod';
import { decodeCursor, encodeCursor, type CursorPosition } from '../platform/http/cursor.ts';
import { InvalidRequest, queryInt, queryOptional } from '../platform/http/validation.ts';
import { isKeyOf, type KeysetOrder, type KeysetPage } from '../platform/store/keyset.ts';

/** page_size of every v1 list (docs/console.md#read-models). */
export const V1_PAGE_SIZE = { min: 1, max: 200, default: 50 } as const;

const cursorField = queryOptional(
  z
    .string()
    .max(4000)
    .transform((text, ctx) => {
      const position = decodeCursor(text);
      if (!position) {
        ctx.addIssue({ code: 'custom', message: 'invalid cursor; pass next_cursor from a previous page unchanged' });
        return z.NEVER;
      }
      return position;
    }),
).meta({ description: 'Opaque: next_cursor of the previous page, with the same sort; absent for the first page' });

/** The query of a v1 list: cursor, page_size and sort (one of `orders`, default the first), plus its own filters. */
export function v1ListQuery<const F extends z.ZodRawShape>(orders: readonly KeysetOrder[], filters: F) {
  const names = orders.map((order) => order.name) as [string, ...string[]];
  return z.strictObject({
    cursor: cursorField,
    page_size: queryInt(V1_PAGE_SIZE),
    sort: queryOptional(z.enum(names))
      .transform((sort) => sort ?? names[0])
      .meta({ description: `One of ${names.join(', ')}; ${names[0]} when absent` }),
    ...filters,
  });
}

/** Where a walk resumes: the sort asked for and the cursor's key, refused (422) when the cursor belongs to another. */
export function walkFrom(
  orders: readonly KeysetOrder[],
  query: { cursor?: CursorPosition | undefined; sort: string; page_size: number },
): { order: KeysetOrder; after: string[] | null; limit: number } {
  const order = orders.find((candidate) => candidate.name === query.sort)!;
  const cursor = query.cursor;
  if (!cursor) return { order, after: null, limit: query.page_size };
  if (cursor.sort !== order.name || !isKeyOf(order, cursor.key)) {
    throw new InvalidRequest([
      { loc: ['query', 'cursor'], msg: `the cursor belongs to sort ${cursor.sort}, not ${order.name}; start again without a cursor`, type: 'cursor_sort' },
    ]);
  }
  return { order, after: cursor.key, limit: query.page_size };
}

/** The v1 list body: `{items, page: {page_size, returned, next_cursor, has_more}}`. */
export function v1Page<Row>(page: KeysetPage<Row>, order: KeysetOrder, pageSize: number) {
  return {
    items: page.items,
    page: {
      page_size: pageSize,
      returned: page.items.length,
      next_cursor: page.next ? encodeCursor({ sort: order.name, key: page.next }) : null,
      has_more: page.next !== null,
    },
  };
}

export const v1PageBody = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    page: z.object({
      page_size: z.number().int(),
      returned: z.number().int(),
      next_cursor: z.string().nullable().describe('Pass as cursor for the next page; null on the last page'),
      has_more: z.boolean(),
    }),
  });
