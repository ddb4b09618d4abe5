import { readFileSync } from 'node:fs';
import { SECRET_FIELDS, type Config } from './schema.ts';

/**
 * This service's own secret values, gathered in one place from the loaded config (both roles' fields: a single config
 * serves both, and the control plane's config holds the gate tokens it calls its workers with) and the environment
 * variables that carry credentials beside it, so the paper steps can refuse evidence that holds one
 * (docs/security.md#security-model). A value is looked for as it is and in the encodings a file made by `base64`, `xxd -p` or a URL or JSON
 * writer holds; a finding names the secret's field, never its value.
 */

/** Shorter values are not looked for: they would match ordinary text. Tokens are at least 16 characters. */
export const MIN_SECRET_LENGTH = 12;

/** Environment variables holding credentials of this service or its Temporal, Postgres and tracing connections. */
export const SECRET_ENV_VARS = [
  'PAPER_WRITER_API_KEY',
  'RESEARCH_PROVIDER_API_KEY',
  'TEMPORAL_API_KEY',
  'TEMPORAL_TLS_CLIENT_KEY_DATA',
  'TEMPORAL_GRPC_META_AUTHORIZATION',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'PGPASSWORD',
] as const;

/** A key file read for its lines: at most this many bytes. */
const KEY_FILE_MAX_BYTES = 64 * 1024;
/** A line of a PEM key's body this long is random enough to be a needle of its own. */
const KEY_LINE_MIN_LENGTH = 32;

export interface NamedSecret {
  /** The config field or environment variable holding it. */
  name: string;
  value: string;
}

interface Needle {
  label: string;
  bytes: Buffer;
}

/** The parts of a value that are secret on their own: a URL's password, a bearer token, a header's value. */
function partsOf(name: string, value: string): NamedSecret[] {
  const parts: NamedSecret[] = [{ name, value }];
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    try {
      const url = new URL(value);
      if (url.password) parts.push({ name: `${name} password`, value: decodeURIComponent(url.password) });
    } catch {
      // Not a URL after all: the value alone.
    }
  }
  const bearer = /^(?:bearer|basic)\s+(\S+)$/i.exec(value.trim());
  if (bearer) parts.push({ name, value: bearer[1]! });
  if (name === 'OTEL_EXPORTER_OTLP_HEADERS') {
    for (const pair of value.split(',')) {
      const at = pair.indexOf('=');
      if (at > 0) parts.push({ name, value: safeDecode(pair.slice(at + 1).trim()) });
    }
  }
  return parts;
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** The long lines of a PEM block's body: any copy of the key, whole or in part, holds some of them. */
function pemLines(name: string, pem: string): NamedSecret[] {
  if (!pem.includes('-----BEGIN')) return [];
  return pem
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line.length >= KEY_LINE_MIN_LENGTH && !line.startsWith('-----'))
    .map((line) => ({ name: `${name} (a line of the key)`, value: line }));
}

/**
 * The base64 text that encodes `bytes` wherever they start in a longer base64 stream: one needle per alignment,
 * keeping only the characters that depend on these bytes alone.
 */
function base64Needles(bytes: Buffer): string[] {
  const needles: string[] = [];
  for (let pad = 0; pad < 3; pad++) {
    const encoded = Buffer.concat([Buffer.alloc(pad), bytes]).toString('base64');
    const from = Math.ceil((pad * 8) / 6);
    const to = Math.floor(((pad + bytes.length) * 8) / 6);
    needles.push(encoded.slice(from, to));
  }
  return needles;
}

/**
 * The needles of one secret: the value as it is, URL- and JSON-escaped, base64 and base64url, hex. Searched in the text
 * with its line breaks left out (as `base64` and `xxd -p` wrap their output), so a needle holds none either.
 */
function needlesOf(secret: NamedSecret): Needle[] {
  // The first label of a text wins: an encoding that leaves the value as it is adds nothing.
  const needles = new Map<string, string>();
  const add = (text: string, label: string) => {
    const unwrapped = text.replace(/[\r\n]/g, '');
    if (!needles.has(unwrapped)) needles.set(unwrapped, label);
  };
  const bytes = Buffer.from(secret.value, 'utf8');
  add(secret.value, secret.name);
  add(encodeURIComponent(secret.value), `${secret.name} (URL-encoded)`);
  add(JSON.stringify(secret.value).slice(1, -1), `${secret.name} (JSON-escaped)`);
  for (const encoded of base64Needles(bytes)) add(encoded, `${secret.name} (base64)`);
  for (const encoded of base64Needles(bytes)) add(encoded.replace(/\+/g, '-').replace(/\//g, '_'), `${secret.name} (base64url)`);
  add(bytes.toString('hex'), `${secret.name} (hex)`);
  add(bytes.toString('hex').toUpperCase(), `${secret.name} (hex)`);
  return [...needles].filter(([text]) => text.length >= MIN_SECRET_LENGTH).map(([text, label]) => ({ label, bytes: Buffer.from(text, 'utf8') }));
}

/** Every needle is this long at least: the rolling hash covers its last this-many bytes. */
const WINDOW = MIN_SECRET_LENGTH;
const BASE = 257;
/** BASE to the power WINDOW, modulo 2^32: what the byte leaving the window weighed. */
const BASE_POW_WINDOW = Array.from({ length: WINDOW }).reduce<number>((power) => Math.imul(power, BASE), 1);
/** A bitmap of 2^20 hash prefixes: most windows are ruled out by one lookup. */
const FILTER_BITS = 20;

function suffixHash(bytes: Buffer): number {
  let hash = 0;
  for (let at = bytes.length - WINDOW; at < bytes.length; at++) hash = (Math.imul(hash, BASE) + bytes[at]!) | 0;
  return hash;
}

/** The needles of one kind, indexed by the hash of their last WINDOW bytes. */
class NeedleIndex {
  readonly byHash = new Map<number, Needle[]>();
  readonly filter = new Uint32Array(1 << (FILTER_BITS - 5));
  /** The longest needle: how much of the stream a search keeps. */
  readonly longest: number;
  readonly needles: readonly Needle[];

  constructor(needles: readonly Needle[]) {
    this.needles = needles;
    for (const needle of needles) {
      const hash = suffixHash(needle.bytes);
      const slot = hash >>> (32 - FILTER_BITS);
      this.filter[slot >>> 5]! |= 1 << (slot & 31);
      this.byHash.set(hash, [...(this.byHash.get(hash) ?? []), needle]);
    }
    this.longest = Math.max(WINDOW, ...needles.map((needle) => needle.bytes.length));
  }
}

/**
 * One stream's search, byte by byte with a rolling hash (Rabin-Karp on each needle's last bytes), keeping the last
 * `longest` bytes seen: a needle is confirmed against them, so one split across chunks is found like any other. Line
 * breaks are passed over: base64 and hex dumps are wrapped, and no secret holds one.
 */
class StreamSearch {
  private readonly history: Uint8Array;
  private readonly mask: number;
  private seen = 0;
  private hash = 0;
  private readonly index: NeedleIndex;
  private readonly found = new Set<string>();

  constructor(index: NeedleIndex) {
    this.index = index;
    let size = 1;
    while (size < index.longest) size <<= 1;
    this.history = new Uint8Array(size);
    this.mask = size - 1;
  }

  feed(chunk: Uint8Array): void {
    if (this.index.needles.length === 0) return;
    const { history, mask } = this;
    const { filter } = this.index;
    // Module bindings read once: in the loop each read would be checked again.
    const window = WINDOW;
    const base = BASE;
    const leavingWeight = BASE_POW_WINDOW;
    const shift = 32 - FILTER_BITS;
    const length = chunk.length;
    let { seen, hash } = this;
    for (let at = 0; at < length; at++) {
      const byte = chunk[at]!;
      if (byte === 0x0a || byte === 0x0d) continue;
      const leaving = seen >= window ? history[(seen - window) & mask]! : 0;
      hash = (Math.imul(hash, base) + byte - Math.imul(leaving, leavingWeight)) | 0;
      history[seen & mask] = byte;
      seen += 1;
      const slot = hash >>> shift;
      if (seen >= window && (filter[slot >>> 5]! & (1 << (slot & 31))) !== 0) this.confirm(hash, seen);
    }
    this.seen = seen;
    this.hash = hash;
  }

  labels(): string[] {
    return [...this.found].sort();
  }

  private confirm(hash: number, seen: number): void {
    for (const needle of this.index.byHash.get(hash) ?? []) {
      const length = needle.bytes.length;
      if (seen < length || this.found.has(needle.label)) continue;
      let matches = true;
      for (let back = 1; back <= length && matches; back++) matches = this.history[(seen - back) & this.mask] === needle.bytes[length - back];
      if (matches) this.found.add(needle.label);
    }
  }
}

/** The search of one file, fed its chunks in order. */
export class SecretScanner {
  private readonly search: StreamSearch;

  constructor(index: NeedleIndex) {
    this.search = new StreamSearch(index);
  }

  feed(chunk: Uint8Array): void {
    this.search.feed(chunk);
  }

  /** The labels of the secrets found so far, sorted: field names and encodings, never values. */
  labels(): string[] {
    return this.search.labels();
  }
}

/** Bytes scanned at a time when a whole buffer is scanned. */
const SCAN_CHUNK_BYTES = 64 * 1024;

export class ServiceSecrets {
  private readonly index: NeedleIndex;

  private constructor(secrets: readonly NamedSecret[]) {
    const usable = secrets.filter((secret) => secret.value.length >= MIN_SECRET_LENGTH);
    const needles = new Map<string, Needle>();
    for (const secret of usable) {
      for (const needle of needlesOf(secret)) if (!needles.has(needle.bytes.toString('latin1'))) needles.set(needle.bytes.toString('latin1'), needle);
    }
    this.index = new NeedleIndex([...needles.values()]);
  }

  static of(secrets: readonly NamedSecret[]): ServiceSecrets {
    return new ServiceSecrets(secrets.flatMap((secret) => [...partsOf(secret.name, secret.value), ...pemLines(secret.name, secret.value)]));
  }

  /** No secrets: for a tool that reads evidence outside the service (the paper benchmark). */
  static readonly none = new ServiceSecrets([]);

  scanner(): SecretScanner {
    return new SecretScanner(this.index);
  }

  /** The labels of the secrets in `content`, scanned in chunks as a file is. */
  find(content: Buffer | string): string[] {
    const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    const scanner = this.scanner();
    for (let at = 0; at < bytes.length; at += SCAN_CHUNK_BYTES) scanner.feed(bytes.subarray(at, at + SCAN_CHUNK_BYTES));
    return scanner.labels();
  }
}

function readKeyFile(path: string): string {
  if (!path) return '';
  try {
    return readFileSync(path).subarray(0, KEY_FILE_MAX_BYTES).toString('utf8');
  } catch {
    return '';
  }
}

/** Every secret of the loaded config and of the environment the process runs with. */
export function serviceSecretsFrom(config: Config, env: NodeJS.ProcessEnv = process.env): ServiceSecrets {
  const secrets: NamedSecret[] = [];
  const add = (name: string, value: unknown) => {
    if (typeof value === 'string' && value.trim() !== '') secrets.push({ name, value: value.trim() });
  };
  for (const field of SECRET_FIELDS) add(field, config[field]);
  for (const [target, settings] of Object.entries(config.worker_targets ?? {})) add(`worker_targets.${target}.bearer_token`, settings.bearer_token);
  add('temporal_tls_client_key_path (the key file)', readKeyFile(env.TEMPORAL_TLS_CLIENT_KEY_PATH || config.temporal_tls_client_key_path));
  for (const name of SECRET_ENV_VARS) add(name, env[name]);
  return ServiceSecrets.of(secrets);
}
