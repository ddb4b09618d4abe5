import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { callbackTokenFingerprint, gateIdentityProof } from '../../platform/http/tokens.ts';

/**
 * A worker gate whose agent finishes at once, for benchmarks of the control plane's run path. It answers what the
 * control plane calls (GET /healthz, GET /dashboard/api, POST /prepare-project, POST /dispatch) and, for each
 * dispatched run, posts the two callbacks a real gate would post: `session_started`, then `session_finished_ready`
 * with paper-sufficient evidence. The real gate only reports readiness after a quiet window of at least 30 s, so a
 * run through this gate measures the control plane and Temporal, not an agent or the gate's idle detection.
 *
 * Every lane can point at the same gate under its own path prefix (`http://host:port/lane-07`), so the gate can count
 * what each lane was sent. It keeps a record of every /dispatch it answered, to find runs dispatched twice.
 */

export interface InstantGateOptions {
  /** Bearer token the control plane sends to /dashboard/api, /prepare-project and /dispatch. */
  gateToken: string;
  /** The control plane's POST /control/api/worker-callback URL and the completion_callback_token it expects. */
  callbackUrl: string;
  callbackToken: string;
  /** true: post the callbacks as soon as /dispatch has been answered. false: only when finish(run_id) is called. */
  autoFinish: boolean;
}

export interface CallbackTiming {
  /** Epoch ms (fractional) just before the POST was sent, and when its answer arrived. */
  sentAt: number;
  answeredAt: number;
  status: number;
  /** The control plane answered `ignored: true` (stale or finished run). */
  ignored: boolean;
  attempts: number;
}

export interface GateRunRecord {
  run_id: string;
  project_id: string;
  lane: string;
  /** How many POST /dispatch this run_id received (a correct control plane sends it once). */
  dispatches: number;
  prepares: number;
  dispatchedAt: number;
  started?: CallbackTiming;
  finished?: CallbackTiming;
  callbackError?: string;
}

const CALLBACK_ATTEMPTS = 5;

/** Epoch milliseconds with sub-millisecond resolution. */
export const epochMs = () => performance.timeOrigin + performance.now();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class InstantGate {
  readonly runs = new Map<string, GateRunRecord>();
  private readonly prepares = new Map<string, number>();
  /** Calls per route, for the printout. */
  readonly calls = { healthz: 0, dashboard: 0, prepare: 0, dispatch: 0, unauthorized: 0 };
  private server: Server | undefined;
  private port = 0;
  private readonly pending = new Set<Promise<unknown>>();

  private readonly options: InstantGateOptions;

  constructor(options: InstantGateOptions) {
    this.options = { ...options };
  }

  /** Where the callbacks go: the control plane's URL, known once its port is. */
  set callbackUrl(url: string) {
    this.options.callbackUrl = url;
    this.callbackUrls = [];
  }

  /** Several control-plane replicas: each run's callbacks go to one of them, the runs taking them in turn. */
  setCallbackUrls(urls: readonly string[]): void {
    this.callbackUrls = [...urls];
  }

  private callbackUrls: string[] = [];
  /** Each run's turn among the replicas, given at its first callback. */
  private readonly turns = new Map<string, number>();

  private callbackUrlOf(run: GateRunRecord): string {
    if (this.callbackUrls.length === 0) return this.options.callbackUrl;
    if (!this.turns.has(run.run_id)) this.turns.set(run.run_id, this.turns.size);
    return this.callbackUrls[this.turns.get(run.run_id)! % this.callbackUrls.length]!;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The base URL of one lane (worker target). */
  laneUrl(lane: string): string {
    return `${this.url}/${lane}`;
  }

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      this.handle(request, response).catch((error: unknown) => {
        if (!response.headersSent) this.send(response, 500, { detail: String(error) });
      });
    });
    this.server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Waits for callbacks still being posted, then closes the server. */
  async stop(): Promise<void> {
    await Promise.allSettled([...this.pending]);
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  setAutoFinish(value: boolean): void {
    this.options.autoFinish = value;
  }

  /** Waits until every callback started so far has been answered. */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  /** Posts session_started, then session_finished_ready, for a run this gate has dispatched. */
  async finish(runId: string): Promise<GateRunRecord> {
    const run = this.record(runId);
    try {
      run.started = await this.postCallback(run, 'session_started');
      run.finished = await this.postCallback(run, 'session_finished_ready');
    } catch (error) {
      run.callbackError = (error as Error).message;
    }
    return run;
  }

  /** The two callbacks one at a time, for a caller that times each (it throws when one is not accepted). */
  async postStarted(runId: string): Promise<CallbackTiming> {
    const run = this.record(runId);
    run.started = await this.postCallback(run, 'session_started');
    return run.started;
  }

  async postFinished(runId: string): Promise<CallbackTiming> {
    const run = this.record(runId);
    run.finished = await this.postCallback(run, 'session_finished_ready');
    return run.finished;
  }

  private record(runId: string): GateRunRecord {
    const run = this.runs.get(runId);
    if (!run) throw new Error(`the instant gate never dispatched ${runId}`);
    return run;
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.pending.add(promise);
    void promise.finally(() => this.pending.delete(promise));
    return promise;
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://gate');
    const segments = url.pathname.split('/').filter(Boolean);
    // The lane prefix (`/lane-07/dispatch`); a request without one counts as lane "default".
    const lane = segments.length > 1 && segments[0]!.startsWith('lane-') ? segments[0]! : 'default';
    const route = `${request.method} /${segments.at(-1) ?? ''}`;
    const body = request.method === 'POST' ? await readJson(request) : {};

    if (route === 'GET /healthz') {
      this.calls.healthz += 1;
      return this.send(response, 200, { ok: true, ready: true, service: 'bench-instant-gate' });
    }
    if (route === 'GET /gate-identity') {
      const proof = gateIdentityProof(this.options.gateToken, url.searchParams.get('challenge') ?? '');
      return this.send(response, 200, { service: 'worker-gate', proof });
    }
    if (request.headers.authorization !== `Bearer ${this.options.gateToken}`) {
      this.calls.unauthorized += 1;
      return this.send(response, 401, { detail: 'unauthorized' });
    }
    switch (route) {
      case 'GET /api':
        this.calls.dashboard += 1;
        return this.send(response, 200, this.dashboard());
      case 'POST /prepare-project': {
        this.calls.prepare += 1;
        const runId = String(body.run_id);
        this.prepares.set(runId, (this.prepares.get(runId) ?? 0) + 1);
        return this.send(response, 200, {
          ok: true,
          run_id: runId,
          project_id: body.project_id,
          project_dir: body.project_dir,
          prompt_file: body.prompt_file,
          created: true,
        });
      }
      case 'POST /dispatch': {
        this.calls.dispatch += 1;
        const runId = String(body.run_id);
        const record = this.runs.get(runId) ?? {
          run_id: runId,
          project_id: String(body.project_id),
          lane,
          dispatches: 0,
          prepares: this.prepares.get(runId) ?? 0,
          dispatchedAt: epochMs(),
        };
        record.dispatches += 1;
        this.runs.set(runId, record);
        const first = record.dispatches === 1;
        this.send(response, 200, {
          ok: true,
          run_id: runId,
          project_id: record.project_id,
          project_dir: body.project_dir,
          workload_class: body.workload_class,
          root_pid: null,
          process_group_id: null,
          tmux_session: null,
          vram_baseline_mib: null,
          gate_state: 'running',
          dispatched_at: new Date(record.dispatchedAt).toISOString(),
          already_dispatched: !first,
        });
        // The agent "finishes" as soon as the dispatch answer is on its way.
        if (first && this.options.autoFinish) this.track(new Promise((resolve) => setImmediate(resolve)).then(() => this.finish(runId)));
        return;
      }
      default:
        return this.send(response, 404, { detail: `no route ${route}` });
    }
  }

  private dashboard() {
    return {
      ok: true,
      service: {
        name: 'bench-instant-gate',
        completion_callback_token_fingerprint: callbackTokenFingerprint(this.options.callbackToken),
      },
      totals: { active_or_waiting: 0, live: 0, callback_pending: this.pending.size },
      telemetry: {
        cpu_pct: 1,
        gpu_pct: null,
        gpu_source: 'none',
        gpu_compute_pids: [],
        vram_used_mib: null,
        memory_available_mib: 65_536,
        memory_source: 'bench',
      },
      runs: [],
      events: [],
    };
  }

  private callbackBody(run: GateRunRecord, eventType: 'session_started' | 'session_finished_ready') {
    const now = new Date().toISOString();
    const finished = eventType === 'session_finished_ready';
    return {
      event_type: eventType,
      run_id: run.run_id,
      session_id: `bench-session-${run.run_id}`,
      project_id: run.project_id,
      gate_state: finished ? 'finished_ready' : 'running',
      reason: finished ? 'bench agent finished at once' : 'bench agent started',
      idle_seen_at: finished ? now : null,
      seen_at: now,
      delivered_at: now,
      telemetry: {
        cpu_pct: 1,
        gpu_pct: null,
        vram_used_mib: null,
        vram_baseline_mib: null,
        memory_available_mib: 65_536,
        gpu_source: 'none',
        quiet_window: null,
      },
      process_tracking: {
        root_pid: null,
        process_group_id: null,
        tmux_session: null,
        root_alive: false,
        alive_pids: [],
        reaped_pids: [],
      },
      question: null,
      evidence: finished
        ? {
            run_notes: true,
            decision_file: true,
            decision: 'negative',
            decision_summary: 'bench',
            results_json_files: 0,
            sufficient_for_paper: true,
          }
        : null,
      idempotency_key: `${run.run_id}:${eventType}`,
    };
  }

  /** One callback, retried on 5xx or no answer as the real gate's outbox would. */
  private async postCallback(run: GateRunRecord, eventType: 'session_started' | 'session_finished_ready'): Promise<CallbackTiming> {
    const body = JSON.stringify(this.callbackBody(run, eventType));
    const sentAt = epochMs();
    let lastError = '';
    for (let attempt = 1; attempt <= CALLBACK_ATTEMPTS; attempt++) {
      try {
        const response = await fetch(this.callbackUrlOf(run), {
          method: 'POST',
          headers: { authorization: `Bearer ${this.options.callbackToken}`, 'content-type': 'application/json' },
          body,
        });
        const text = await response.text();
        if (response.status < 500) {
          const answer = (text ? JSON.parse(text) : {}) as { ignored?: boolean };
          if (response.status >= 400) throw new Error(`${eventType} for ${run.run_id} answered ${response.status}: ${text.slice(0, 300)}`);
          return { sentAt, answeredAt: epochMs(), status: response.status, ignored: answer.ignored === true, attempts: attempt };
        }
        lastError = `${response.status}: ${text.slice(0, 300)}`;
      } catch (error) {
        if ((error as Error).message.includes(' answered ')) throw error;
        lastError = (error as Error).message;
      }
      await sleep(100 * 2 ** (attempt - 1));
    }
    throw new Error(`${eventType} for ${run.run_id} not accepted after ${CALLBACK_ATTEMPTS} attempts: ${lastError}`);
  }

  private send(response: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    response.end(text);
  }
}

async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}
