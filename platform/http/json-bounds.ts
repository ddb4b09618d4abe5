import type { z } from 'zod';

/** How large (compact JSON, in bytes) and how deeply nested a value of another program's making, kept as sent, may be. */
export interface JsonBounds {
  maxBytes: number;
  maxDepth: number;
}

/** True when objects and arrays nest more than `limit` levels; looks no deeper than that, so any depth is safe. */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (limit === 0) return true;
  const children = Array.isArray(value) ? value : Object.values(value);
  return children.some((child) => nestsDeeperThan(child, limit - 1));
}

/**
 * `schema`, refusing a value that nests deeper or is larger as JSON than `bounds` allow, with one issue naming `what`
 * at the value's own place. Depth is checked first, so only a value known to be shallow is serialised to measure it.
 */
export function withinJsonBounds<T extends z.ZodType>(schema: T, what: string, bounds: JsonBounds): T {
  return schema.superRefine((value, ctx) => {
    if (nestsDeeperThan(value, bounds.maxDepth)) {
      ctx.addIssue({ code: 'custom', message: `${what} nests deeper than ${bounds.maxDepth} levels` });
    } else if (Buffer.byteLength(JSON.stringify(value)) > bounds.maxBytes) {
      ctx.addIssue({ code: 'custom', message: `${what} is larger than ${bounds.maxBytes} bytes as JSON` });
    }
  });
}
