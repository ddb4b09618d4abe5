import { createHash, createHmac, scryptSync } from 'node:crypto';
import { ConfigFieldsSchema, ENV_ONLY_FIELDS, PER_REPLICA_FIELDS, SECRET_FIELDS, type Config } from './schema.ts';

/**
 * The fingerprint of the part of a control plane's config that every replica of a cluster must share
 * (docs/operations.md#running-on-several-machines): every field but the per-replica ones (PER_REPLICA_FIELDS), with each secret replaced by an
 * HMAC under a key derived from the control API token, which the replicas share, by scrypt: two replicas whose tokens
 * or settings differ get different fingerprints, while each guess at a token from a published digest costs a scrypt.
 */

export interface ConfigFingerprint {
  /** 16 hex characters over every cluster field. */
  fingerprint: string;
  /** Each cluster field's own digest (16 hex characters), to name the fields two replicas disagree on. */
  fields: Record<string, string>;
}

const DIGEST_CHARS = 16;

/** JSON with every object's keys sorted, so equal values give equal text whatever their key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, DIGEST_CHARS);

export function configFingerprint(config: Config): ConfigFingerprint {
  const key = scryptSync(config.control_api_bearer_token, 'research-control-plane config fingerprint', 32);
  const keyed = (value: string) => `hmac:${createHmac('sha256', key).update(value).digest('hex').slice(0, DIGEST_CHARS)}`;
  const secret = new Set<string>(SECRET_FIELDS);
  const perReplica = new Set<string>(PER_REPLICA_FIELDS);
  const names = [...Object.keys(ConfigFieldsSchema.shape), ...Object.values(ENV_ONLY_FIELDS)].filter((name) => !perReplica.has(name));
  const fields: Record<string, string> = {};
  for (const name of names.sort()) {
    const value = (config as Record<string, unknown>)[name];
    const shown =
      name === 'worker_targets'
        ? Object.fromEntries(Object.entries(config.worker_targets).map(([lane, target]) => [lane, { ...target, bearer_token: keyed(target.bearer_token) }]))
        : secret.has(name) && typeof value === 'string' && value !== ''
          ? keyed(value)
          : value;
    fields[name] = sha256(canonicalJson(shown));
  }
  return { fingerprint: sha256(canonicalJson(fields)), fields };
}
