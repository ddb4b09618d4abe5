import { z } from 'zod';

/**
 * Any JSON value, named once in the OpenAPI document (`JsonValue`): what an object whose shape another system decides
 * holds. Typed as `unknown` in the code, where such a value is passed on, never read as a known shape.
 */
export const JsonValueSchema: z.ZodType<unknown> = z
  .lazy(() => z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(JsonValueSchema), z.record(z.string(), JsonValueSchema)]))
  .meta({ id: 'JsonValue', description: 'Any JSON value: a string, number, boolean, null, or an array or object of JSON values' });

/** A JSON object whose fields another system decides. */
export const jsonObject = () => z.record(z.string(), JsonValueSchema);
