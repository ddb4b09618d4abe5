import { appendFileSync, chmodSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

/**
 * The operational trace (docs/operations.md#operational-trace): one JSON line per captured exchange, inbound command requests
 * and outbound calls to worker gates, with their payloads cut to a size limit and every secret replaced. It exists to
 * debug an install, so it favours being exact and simple (a synchronous append per exchange) over throughput.
 */

export const REDACTED = '[redacted]';

export interface OperationalTraceOptions {
  /** The trace file; created with mode 0600 (its directory 0700 when created). */
  path: string;
  /** Each payload is cut to this many bytes of its serialized text. */
  maxPayloadBytes: number;
  /** Every configured secret value; replaced wherever it appears in a line. */
  secrets: readonly string[];
  /** Also replace the value of every `prompt_text` field. */
  redactPromptText: boolean;
}

export interface TracedPayload {
  /** Size of the whole serialized payload, after redaction. */
  bytes: number;
  truncated: boolean;
  /** The serialized payload, cut to maxPayloadBytes when `truncated`; null when there was none. */
  text: string | null;
}

export interface TraceExchange {
  direction: 'inbound' | 'outbound';
  /** Inbound: the route template; outbound: the target's name. */
  route?: string;
  target?: string;
  /** Outbound: the path called on the target. */
  path?: string;
  method: string;
  /** HTTP status, or null when no answer came. */
  status: number | null;
  duration_ms: number;
  request_id?: string;
  error?: string;
  request_headers?: Record<string, string>;
  request: unknown;
  response: unknown;
}

/** Headers safe to capture; everything else (authorization, cookies, CSRF tokens, anything unknown) is left out. */
const SAFE_HEADERS = new Set(['content-type', 'content-length', 'accept', 'user-agent', 'x-request-id']);

/** Field names whose values are secrets wherever they appear in a payload. */
function isSecretKey(key: string): boolean {
  const k = key.toLowerCase();
  return (
    k === 'authorization' ||
    k === 'cookie' ||
    k === 'set-cookie' ||
    k === 'x-csrf-token' ||
    k === 'token' ||
    k.endsWith('_token') ||
    k.endsWith('-token') ||
    k.includes('api_key') ||
    k.includes('apikey') ||
    k.includes('password') ||
    k.includes('secret')
  );
}

/** Newest issued session cookies and CSRF tokens kept for value redaction; older sessions have long expired. */
const MAX_LEARNED_SECRETS = 10_000;
/** Shorter values would redact ordinary words; every configured token is at least 16 characters. */
const MIN_SECRET_LENGTH = 8;

export class OperationalTrace {
  private readonly configured: string[];
  private readonly learned = new Set<string>();
  private fileReady = false;

  readonly options: OperationalTraceOptions;

  constructor(options: OperationalTraceOptions) {
    this.options = options;
    this.configured = options.secrets.filter((s) => s.length >= MIN_SECRET_LENGTH);
  }

  /** A secret this process issued or was shown (a session cookie, a CSRF token): redacted from every later line. */
  learnSecret(value: string): void {
    if (value.length < MIN_SECRET_LENGTH || this.learned.has(value)) return;
    this.learned.add(value);
    if (this.learned.size > MAX_LEARNED_SECRETS) this.learned.delete(this.learned.values().next().value as string);
  }

  /** Safe-listed headers only, as strings. */
  safeHeaders(headers: Record<string, unknown>): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (SAFE_HEADERS.has(name.toLowerCase()) && value !== undefined) out[name.toLowerCase()] = String(value);
    }
    return out;
  }

  /**
   * One payload (a parsed body, a JSON text or any other text) as it goes into the trace: secret fields replaced,
   * secret values replaced, then cut to the limit. `extraSecrets` are values known secret for this exchange only.
   */
  payload(value: unknown, extraSecrets: Set<string>): TracedPayload {
    if (value === undefined || value === null || value === '') return { bytes: 0, truncated: false, text: null };
    let parsed: unknown = value;
    if (typeof value === 'string' || Buffer.isBuffer(value)) {
      const text = value.toString();
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    const redacted = this.redactKeys(parsed, extraSecrets);
    const text = this.redactValues(typeof redacted === 'string' ? redacted : JSON.stringify(redacted) ?? String(redacted), extraSecrets);
    const bytes = Buffer.byteLength(text);
    if (bytes <= this.options.maxPayloadBytes) return { bytes, truncated: false, text };
    return { bytes, truncated: true, text: cutToBytes(text, this.options.maxPayloadBytes) };
  }

  /** Appends one exchange. Never throws: a trace that cannot be written must not fail the request it describes. */
  record(exchange: TraceExchange, extraSecrets: Set<string> = new Set()): void {
    try {
      const line = this.redactValues(JSON.stringify({ at: new Date().toISOString(), ...exchange }), extraSecrets);
      this.ensureFile();
      appendFileSync(this.options.path, `${line}\n`, { mode: 0o600 });
    } catch {
      // A full disk or a removed directory loses trace lines, never requests.
    }
  }

  private ensureFile(): void {
    if (this.fileReady) return;
    mkdirSync(dirname(this.options.path), { recursive: true, mode: 0o700 });
    appendFileSync(this.options.path, '', { mode: 0o600 });
    // An existing file keeps its mode on append; the trace holds payloads, so only this user may read it.
    chmodSync(this.options.path, 0o600);
    this.fileReady = true;
  }

  private redactKeys(value: unknown, found: Set<string>): unknown {
    if (Array.isArray(value)) return value.map((item) => this.redactKeys(item, found));
    if (value === null || typeof value !== 'object') return value;
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) {
      const secret = isSecretKey(key) || (this.options.redactPromptText && key === 'prompt_text');
      if (secret && inner !== null && inner !== undefined && inner !== '') {
        // The same value elsewhere in the exchange (echoed back, or in another field) is a secret too.
        if (typeof inner === 'string' && !(key === 'prompt_text')) found.add(inner);
        out[key] = REDACTED;
      } else {
        out[key] = this.redactKeys(inner, found);
      }
    }
    return out;
  }

  /** Replaces every known secret value, raw and as it reads inside a JSON string, anywhere in `text`. */
  private redactValues(text: string, extra: Set<string>): string {
    let out = text;
    // Longest first: a secret that contains another (a database URL and its password) goes whole.
    const secrets = [...new Set([...this.configured, ...this.learned, ...extra])].sort((a, b) => b.length - a.length);
    for (const secret of secrets) {
      if (secret.length < MIN_SECRET_LENGTH) continue;
      for (const form of new Set([secret, jsonInner(secret), jsonInner(jsonInner(secret))])) {
        if (out.includes(form)) out = out.split(form).join(REDACTED);
      }
    }
    return out;
  }
}

const jsonInner = (value: string) => JSON.stringify(value).slice(1, -1);

/** The longest prefix of `text` within `maxBytes` of UTF-8 that does not split a character. */
function cutToBytes(text: string, maxBytes: number): string {
  const buffer = Buffer.from(text, 'utf8');
  let end = maxBytes;
  // Step back over continuation bytes (10xxxxxx) so the cut falls on a character boundary.
  while (end > 0 && ((buffer[end] ?? 0) & 0xc0) === 0x80) end--;
  return buffer.subarray(0, end).toString('utf8');
}

// ---------------------------------------------------------------------------
// The inbound hook: command routes (every method but GET, HEAD and OPTIONS).

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const SESSION_COOKIE_VALUE = /^[^=;\s]+=([^;]*)/;

interface Captured {
  response: unknown;
  secrets: Set<string>;
}

function requestSecrets(request: FastifyRequest): Set<string> {
  const secrets = new Set<string>();
  const authorization = request.headers.authorization;
  if (typeof authorization === 'string') {
    secrets.add(authorization);
    const bearer = /^\s*\S+\s+(.+)$/.exec(authorization)?.[1];
    if (bearer) secrets.add(bearer.trim());
  }
  const csrf = request.headers['x-csrf-token'];
  if (typeof csrf === 'string') secrets.add(csrf);
  const cookie = request.headers.cookie;
  if (typeof cookie === 'string') {
    for (const part of cookie.split(';')) {
      const value = part.slice(part.indexOf('=') + 1).trim();
      if (value) secrets.add(value);
    }
  }
  return secrets;
}

/** Session cookies this response issues: redacted from this line and every later one. */
function learnIssuedCookies(trace: OperationalTrace, reply: FastifyReply, secrets: Set<string>): void {
  const header = reply.getHeader('set-cookie');
  for (const cookie of [header ?? []].flat()) {
    const value = SESSION_COOKIE_VALUE.exec(String(cookie))?.[1];
    if (value) {
      trace.learnSecret(value);
      secrets.add(value);
    }
  }
}

/** Registers the inbound capture on the whole server (fastify-plugin: its hooks see every route). */
export const operationalTraceHooks = fp(
  async (app: FastifyInstance, options: { trace: OperationalTrace }) => {
    const { trace } = options;
    const captured = new WeakMap<FastifyRequest, Captured>();
    const traced = (request: FastifyRequest) => !READ_METHODS.has(request.method) && request.routeOptions.url !== undefined;

    app.addHook('onSend', async (request, reply, payload) => {
      if (!traced(request)) return payload;
      const secrets = requestSecrets(request);
      learnIssuedCookies(trace, reply, secrets);
      captured.set(request, { response: typeof payload === 'string' || Buffer.isBuffer(payload) ? payload : null, secrets });
      return payload;
    });

    app.addHook('onResponse', async (request, reply) => {
      if (!traced(request)) return;
      const { response, secrets } = captured.get(request) ?? { response: null, secrets: requestSecrets(request) };
      const requestPayload = trace.payload(request.body, secrets);
      const responsePayload = trace.payload(response, secrets);
      // Issued CSRF tokens (found by key in the response) stay secret for the rest of the process.
      for (const value of secrets) trace.learnSecret(value);
      trace.record(
        {
          direction: 'inbound',
          route: request.routeOptions.url as string,
          method: request.method,
          status: reply.statusCode,
          duration_ms: Math.round(reply.elapsedTime * 10) / 10,
          request_id: request.id,
          request_headers: trace.safeHeaders(request.headers),
          request: requestPayload,
          response: responsePayload,
        },
        secrets,
      );
    });
  },
  { name: 'operational-trace' },
);
