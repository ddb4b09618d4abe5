import { z } from 'zod';
import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';
import { fieldMeta, isRecord } from './fields/field-kinds.ts';

// Field documentation, derived from the schema's JSON Schema form and metadata.

export type ConfigFieldDoc = {
  name: string;
  type: string;
  /** JSON text of the default, or "" when the field has none. */
  default: string;
  required: boolean;
  secret: boolean;
  /** May differ between control-plane replicas (left out of the config fingerprint). */
  perReplica: boolean;
  description: string;
  /** Environment variable that overrides the file value, if any. */
  env?: string;
};

type JsonNode = Record<string, unknown>;

function asNode(value: unknown): JsonNode | undefined {
  return isRecord(value) ? value : undefined;
}

function numberRange(node: JsonNode): string {
  const limit = Number.MAX_SAFE_INTEGER;
  const min = typeof node.minimum === 'number' && node.minimum > -limit ? node.minimum : undefined;
  const max = typeof node.maximum === 'number' && node.maximum < limit ? node.maximum : undefined;
  const exclusiveMin = typeof node.exclusiveMinimum === 'number' ? node.exclusiveMinimum : undefined;
  if (min !== undefined && max !== undefined) return ` ${min}–${max}`;
  if (exclusiveMin !== undefined) return ` > ${exclusiveMin}`;
  if (min !== undefined) return ` ≥ ${min}`;
  if (max !== undefined) return ` ≤ ${max}`;
  return '';
}

function describeKey(node: JsonNode | undefined): string {
  if (!node) return 'name';
  if (Array.isArray(node.enum)) {
    const same = node.enum.length === WORKLOAD_CLASSES.length && WORKLOAD_CLASSES.every((c) => (node.enum as unknown[]).includes(c));
    return same ? 'workload class' : node.enum.map((v) => JSON.stringify(v)).join(' | ');
  }
  return typeof node.pattern === 'string' ? `name (/${node.pattern}/)` : 'name';
}

function describeType(node: JsonNode | undefined): string {
  if (!node) return 'any';
  if (typeof node.title === 'string') return node.title;
  if (Array.isArray(node.enum)) return node.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (node.const !== undefined) return JSON.stringify(node.const);
  if (Array.isArray(node.anyOf)) return node.anyOf.map((n) => describeType(asNode(n))).join(' | ');
  const secret = node.secret === true ? 'secret ' : '';
  switch (node.type) {
    case 'string': {
      if (node.format === 'uri') return `${secret}URL`;
      const min = typeof node.minLength === 'number' ? node.minLength : 0;
      if (min > 1) return `${secret}string (min length ${min})`;
      return `${secret}${min === 1 ? 'non-empty string' : 'string'}`;
    }
    case 'integer':
    case 'number':
      return `${node.type}${numberRange(node)}`;
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array': {
      const notes = [node.minItems === 1 ? 'non-empty' : '', node.uniqueItems === true ? 'unique' : ''].filter(Boolean);
      return `array of ${describeType(asNode(node.items))}${notes.length ? ` (${notes.join(', ')})` : ''}`;
    }
    case 'object': {
      const properties = asNode(node.properties);
      if (properties) {
        const required = Array.isArray(node.required) ? node.required : [];
        const parts = Object.entries(properties).map(
          ([name, child]) => `${name}${required.includes(name) ? '' : '?'}: ${describeType(asNode(child))}`,
        );
        return `{ ${parts.join(', ')} }`;
      }
      return `map ${describeKey(asNode(node.propertyNames))} → ${describeType(asNode(node.additionalProperties))}`;
    }
    default:
      return 'any';
  }
}

/** One entry per field of a config schema, in schema order, for the configuration reference (docs/configuration.md). */
export function fieldDocs(schema: z.ZodObject): ConfigFieldDoc[] {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonNode;
  const properties = asNode(json.properties) ?? {};
  const required = new Set(Array.isArray(json.required) ? json.required : []);
  return Object.entries(schema.shape).map(([name, field]) => {
    const node = asNode(properties[name]) ?? {};
    const meta = fieldMeta(field);
    const entry: ConfigFieldDoc = {
      name,
      // Secrecy of a top-level field goes in its own column, not in the type text.
      type: describeType({ ...node, secret: false }),
      default: 'default' in node ? JSON.stringify(node.default) : '',
      required: required.has(name),
      secret: meta?.secret === true,
      perReplica: meta?.perReplica === true,
      description: meta?.description ?? '',
    };
    if (meta?.env) entry.env = meta.env;
    return entry;
  });
}
