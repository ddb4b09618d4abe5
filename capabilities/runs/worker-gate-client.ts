import type { WorkerTarget } from './domain/worker-lanes.ts';
import type { OperationalTrace } from '../../platform/observability/operational-trace.ts';
import { randomToken, gateIdentityProven } from '../../platform/http/tokens.ts';

/**
 * HTTP client of a worker gate (docs/worker-gate.md#worker-gate). Every call is bounded by a timeout and
 * answers a WorkerGateResponse or throws WorkerGateError, which says whether trying again is safe.
 */

export interface WorkerGateResponse<T = unknown> {
  status: number;
  body: T;
  ms: number;
}

export class WorkerGateError extends Error {
  /** HTTP status, or null when no answer came (connection refused, timeout). */
  readonly status: number | null;
  /** True when the same call may be repeated: no answer, or a 5xx other than the dispatch script's 502/504. */
  readonly retryable: boolean;
  readonly body: unknown;

  constructor(message: string, status: number | null, retryable: boolean, body: unknown = null) {
    super(message);
    this.status = status;
    this.retryable = retryable;
    this.body = body;
    this.name = 'WorkerGateError';
  }
}

const detailOf = (body: unknown): string => {
  if (body && typeof body === 'object' && 'detail' in body) {
    const detail = (body as { detail: unknown }).detail;
    if (typeof detail === 'string') return detail;
    if (detail && typeof detail === 'object' && 'message' in detail) return String((detail as { message: unknown }).message);
    return JSON.stringify(detail);
  }
  return typeof body === 'string' ? body.slice(0, 300) : JSON.stringify(body)?.slice(0, 300) ?? '';
};

export interface GateRequest {
  method: 'GET' | 'POST';
  path: string;
  /** Sent as Bearer when given; /healthz needs none. */
  token?: string;
  body?: unknown;
  timeoutMs: number;
  /** The operational trace, when enabled, and the name the call is recorded under. */
  trace?: { writer: OperationalTrace; target: string };
  /** Aborts the call (the caller's cancellation): the call throws the signal's reason instead of a WorkerGateError. */
  signal?: AbortSignal | undefined;
}

const isRedirect = (status: number): boolean => status >= 300 && status < 400;

/**
 * One request to a gate; answers any status but a redirect (the caller decides), and throws when no answer came or
 * the gate answered 3xx: a redirect is a gate error that is not retried.
 */
export async function gateRequest<T = unknown>(baseUrl: string, request: GateRequest): Promise<WorkerGateResponse<T>> {
  const url = new URL(request.path, baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
  const started = performance.now();
  const traced = (status: number | null, responseBody: unknown, error?: string) => {
    if (!request.trace) return;
    const { writer, target } = request.trace;
    const secrets = new Set(request.token ? [request.token] : []);
    writer.record(
      {
        direction: 'outbound',
        target,
        path: url.pathname,
        method: request.method,
        status,
        duration_ms: Math.round((performance.now() - started) * 10) / 10,
        ...(error ? { error } : {}),
        request: writer.payload(request.body, secrets),
        response: writer.payload(responseBody, secrets),
      },
      secrets,
    );
  };
  let response: Response;
  try {
    response = await fetch(url, {
      method: request.method,
      headers: {
        accept: 'application/json',
        ...(request.token ? { authorization: `Bearer ${request.token}` } : {}),
        ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
      // A gate is not trusted to send the control plane's requests elsewhere: a redirect is an error, not followed.
      redirect: 'manual',
      signal: request.signal ? AbortSignal.any([request.signal, AbortSignal.timeout(request.timeoutMs)]) : AbortSignal.timeout(request.timeoutMs),
    });
  } catch (cause) {
    const error = cause as Error;
    if (request.signal?.aborted) {
      traced(null, null, 'aborted by the caller');
      throw request.signal.reason ?? error;
    }
    const reason = error.name === 'TimeoutError' ? `no answer within ${request.timeoutMs} ms` : (error.cause as Error | undefined)?.message ?? error.message;
    traced(null, null, reason);
    throw new WorkerGateError(`${request.method} ${url.origin}${url.pathname}: ${reason}`, null, true);
  }
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: keep the text for the error message.
  }
  traced(response.status, text);
  if (isRedirect(response.status)) {
    throw new WorkerGateError(`${request.method} ${url.origin}${url.pathname}: answered ${response.status}; redirects are not followed`, response.status, false, body);
  }
  return { status: response.status, body: body as T, ms: Math.round(performance.now() - started) };
}

/** Throws WorkerGateError unless the answer is 2xx. The dispatch script's own failures (502, 504) are not retried. */
function expectSuccess<T>(target: WorkerTarget, path: string, response: WorkerGateResponse<T>, notRetried: ReadonlySet<number>): T {
  if (response.status >= 200 && response.status < 300) return response.body;
  const retryable = response.status >= 500 && !notRetried.has(response.status);
  throw new WorkerGateError(
    `worker gate ${target.name} answered ${response.status} to ${path}: ${detailOf(response.body)}`,
    response.status,
    retryable,
    response.body,
  );
}

export interface WorkerGateClient {
  prepareProject(body: Record<string, unknown>): Promise<Record<string, unknown>>;
  dispatch(body: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** Resumes the session of a run whose agent waits on an answer (docs/worker-gate.md#resuming-a-run). */
  resumeRun(runId: string, body: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** Stops the run's processes on the worker; 404 when the gate never started it. */
  cancelRun(runId: string): Promise<WorkerGateResponse>;
  healthz(): Promise<WorkerGateResponse>;
  dashboard(query?: { limit?: number; event_limit?: number }): Promise<WorkerGateResponse>;
  /** The run's result files (docs/worker-gate.md#a-runs-result-files), and one of them with its preview. */
  runFiles(runId: string): Promise<WorkerGateResponse>;
  runFile(runId: string, path: string): Promise<WorkerGateResponse>;
}

/**
 * Asks the gate to prove, with an HMAC of a fresh challenge keyed by the target's token, that it holds that token; throws
 * unless it does. Every call that carries the token comes after it, so a process that took the gate's address (another
 * program on the port) never receives the token.
 */
async function proveGateIdentity(
  target: WorkerTarget,
  options: { timeoutMs: number; trace?: { writer: OperationalTrace; target: string }; signal?: AbortSignal | undefined },
): Promise<void> {
  const challenge = randomToken();
  const response = await gateRequest<unknown>(target.wake_gate_url, {
    method: 'GET',
    path: `gate-identity?challenge=${challenge}`,
    timeoutMs: options.timeoutMs,
    ...(options.trace ? { trace: options.trace } : {}),
    signal: options.signal,
  });
  const proof = response.status === 200 && response.body && typeof response.body === 'object' ? (response.body as { proof?: unknown }).proof : undefined;
  if (typeof proof === 'string' && gateIdentityProven(target.bearer_token, challenge, proof)) return;
  // A gate that is restarting or overloaded proves nothing either way: asked again later, like any other call of it.
  if (response.status >= 500 || response.status === 429) {
    throw new WorkerGateError(`worker gate ${target.name} answered ${response.status} to /gate-identity; its token was not sent`, response.status, true, response.body);
  }
  if (response.status === 404) {
    throw new WorkerGateError(
      `${target.wake_gate_url} answered 404 to /gate-identity: a worker gate of an earlier release, or another program; its token was not sent. ` +
        'Upgrade the worker gate before the control plane (docs/worker-gate.md#worker-gate)',
      response.status,
      false,
      response.body,
    );
  }
  const why = response.status !== 200 ? `answered ${response.status} to /gate-identity` : 'its proof does not match the token';
  throw new WorkerGateError(
    `${target.wake_gate_url} is not worker gate ${target.name}, or holds another token (${why}); its token was not sent. ` +
      'Another program may be listening at that address: check the gate URL and port (docs/worker-gate.md#worker-gate)',
    response.status,
    false,
    response.body,
  );
}

/** The dispatch script may have started the agent before it failed: running it again could start a second one. */
const DISPATCH_SCRIPT_FAILURES: ReadonlySet<number> = new Set([502, 504]);
const NOTHING: ReadonlySet<number> = new Set();

/**
 * `signal`: the caller's cancellation (an activity's), which aborts a call in flight; a dispatch that reached the gate
 * before the abort is then the gate's to refuse (it remembers a cancel of a run it has not seen).
 */
export function workerGateClient(target: WorkerTarget, options: { timeoutMs: number; trace?: OperationalTrace | undefined; signal?: AbortSignal | undefined }): WorkerGateClient {
  const base = target.wake_gate_url;
  const token = target.bearer_token;
  const trace = options.trace ? { trace: { writer: options.trace, target: target.name } } : {};
  const traceAndSignal = { ...trace, signal: options.signal };
  let identity: Promise<void> | undefined;
  // Once per client: a failed proof is asked again on the next call, a passed one is kept.
  const proven = async () => {
    identity ??= proveGateIdentity(target, { timeoutMs: options.timeoutMs, ...traceAndSignal }).catch((error: unknown) => {
      identity = undefined;
      throw error;
    });
    await identity;
  };
  return {
    async prepareProject(body) {
      await proven();
      const response = await gateRequest<Record<string, unknown>>(base, { method: 'POST', path: 'prepare-project', token, body, timeoutMs: options.timeoutMs, ...traceAndSignal });
      return expectSuccess(target, '/prepare-project', response, NOTHING);
    },
    async dispatch(body) {
      await proven();
      const response = await gateRequest<Record<string, unknown>>(base, { method: 'POST', path: 'dispatch', token, body, timeoutMs: options.timeoutMs, ...traceAndSignal });
      return expectSuccess(target, '/dispatch', response, DISPATCH_SCRIPT_FAILURES);
    },
    async resumeRun(runId, body) {
      await proven();
      const path = `runs/${encodeURIComponent(runId)}/resume`;
      const response = await gateRequest<Record<string, unknown>>(base, { method: 'POST', path, token, body, timeoutMs: options.timeoutMs, ...traceAndSignal });
      return expectSuccess(target, `/${path}`, response, DISPATCH_SCRIPT_FAILURES);
    },
    async cancelRun(runId) {
      await proven();
      return gateRequest(base, { method: 'POST', path: `runs/${encodeURIComponent(runId)}/cancel`, token, timeoutMs: options.timeoutMs, ...traceAndSignal });
    },
    healthz() {
      return gateRequest(base, { method: 'GET', path: 'healthz', timeoutMs: options.timeoutMs, ...trace });
    },
    async runFiles(runId) {
      await proven();
      return gateRequest(base, { method: 'GET', path: `runs/${encodeURIComponent(runId)}/files`, token, timeoutMs: options.timeoutMs, ...traceAndSignal });
    },
    async runFile(runId, path) {
      await proven();
      const query = new URLSearchParams({ path });
      return gateRequest(base, { method: 'GET', path: `runs/${encodeURIComponent(runId)}/files/content?${query}`, token, timeoutMs: options.timeoutMs, ...traceAndSignal });
    },
    async dashboard(query = {}) {
      await proven();
      const params = new URLSearchParams();
      if (query.limit !== undefined) params.set('limit', String(query.limit));
      if (query.event_limit !== undefined) params.set('event_limit', String(query.event_limit));
      const suffix = params.size > 0 ? `?${params}` : '';
      return gateRequest(base, { method: 'GET', path: `dashboard/api${suffix}`, token, timeoutMs: options.timeoutMs, ...traceAndSignal });
    },
  };
}
