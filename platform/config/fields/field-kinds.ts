import { z } from 'zod';
import { WORKLOAD_CLASSES } from '../../../worker-gate/contract/workload.ts';

/** The kinds of value a config field takes, and the metadata each field carries, shared by every room's fragment. */

export const MIN_TOKEN_LENGTH = 16;
export const PLACEHOLDER_REASON = 'is a placeholder; set a real value';
export const HTTP_URL_REASON = 'must be an http(s) URL with a host';

/**
 * True for values copied unchanged from an example config: `<TOKEN>` (alone or inside a
 * longer value such as `http://<worker_url>`), `replace-with-...`, `REPLACE_ME...`, `changeme`.
 */
export function isPlaceholder(value: string): boolean {
  const v = value.trim();
  const lower = v.toLowerCase();
  return (
    (v.startsWith('<') && v.endsWith('>')) ||
    /<[A-Za-z][A-Za-z0-9_-]*>/.test(v) ||
    lower.startsWith('replace-with-') ||
    lower.startsWith('replace_me') ||
    lower === 'changeme'
  );
}

export function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

export function isPostgresUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'postgres:' || url.protocol === 'postgresql:';
  } catch {
    return false;
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// A wrongly typed value counts as set: its type problem is reported on its own.
export function isSet(value: unknown): boolean {
  return value !== undefined && value !== null && !(typeof value === 'string' && value.trim() === '');
}

export type FieldMeta = {
  description: string;
  secret?: boolean;
  /**
   * The field may differ between control-plane replicas of one cluster: it names something of the replica's own machine
   * (where it listens, its files, paths and programs, how it reaches shared services, where a gate it serves posts its
   * callbacks). Every other field must be the same on all of them (docs/operations.md#running-on-several-machines).
   */
  perReplica?: boolean;
  /** Environment variable that overrides the file value. */
  env?: string;
};

export function doc<T extends z.ZodType>(schema: T, meta: FieldMeta): T {
  return schema.meta(meta);
}

export function fieldMeta(schema: z.ZodType): FieldMeta | undefined {
  return z.globalRegistry.get(schema) as FieldMeta | undefined;
}

// Every string in the file goes through this, so placeholders are refused wherever they
// appear. No `abort`: an aborting issue would also stop the root cross-field check, so a
// placeholder may come with further issues on the same path (loadConfig keeps only this one).
export const text = () => z.string().refine((v) => !isPlaceholder(v), PLACEHOLDER_REASON);
export const nonEmptyText = () => text().min(1);
export const token = () => text().min(MIN_TOKEN_LENGTH);
export const optionalToken = () =>
  text()
    .refine((v) => v === '' || v.length >= MIN_TOKEN_LENGTH, `must be at least ${MIN_TOKEN_LENGTH} characters`)
    .optional();
export const httpUrl = () => text().refine(isHttpUrl, HTTP_URL_REASON).meta({ format: 'uri' });
export const optionalHttpUrl = () =>
  text()
    .refine((v) => v === '' || isHttpUrl(v), HTTP_URL_REASON)
    .meta({ format: 'uri' })
    .optional();
export const hostEntry = () =>
  text()
    .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(:\d{1,5})?$/, 'must be a host name, optionally with :port (no scheme or path)')
    .refine((v) => Number(/\]?:(\d+)$/.exec(v)?.[1] ?? 0) <= 65535, 'has a port above 65535')
    .meta({ title: 'host[:port]' });
export const pct = () => z.number().min(0).max(100);
export const port = (min: number) => z.number().int().min(min).max(65535);

export const WorkloadClassSchema = z.enum(WORKLOAD_CLASSES);
