import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { sha256Hex } from '../platform/http/tokens.ts';
import type { GateCallbackPayload } from './contract/callback-body.ts';
import { createJsonExclusive, readJsonDir, writeJsonAtomic } from './json-files.ts';

/** A callback as written to disk before the first attempt to send it. */
export interface OutboxEntry {
  idempotency_key: string;
  run_id: string;
  event_type: GateCallbackPayload['event_type'];
  /** Order of creation; callbacks of one run are delivered in this order. */
  seq: number;
  payload: GateCallbackPayload;
  created_at: string;
  attempts: number;
  next_attempt_at: string;
  last_status: number | null;
  last_error: string | null;
  delivered_at: string | null;
}

export interface CallbackOutboxOptions {
  dir: string;
  /** The control-plane replicas' callback URLs, the configured one first (completion_callback_fallback_urls after it). */
  urls: readonly string[];
  token: string;
  timeoutSec: number;
  logger: Logger;
  retryBaseMs?: number;
  retryCapMs?: number;
  onDelivered?: (entry: OutboxEntry) => void;
  /** Told of each callback queued (the run's transcript records what the gate reported). */
  onQueued?: (payload: GateCallbackPayload) => void;
}

const DEFAULT_RETRY_BASE_MS = 1000;
const DEFAULT_RETRY_CAP_MS = 60_000;
const ERROR_TEXT_LIMIT = 300;
/** Delivered entries are kept this long (they show on /dashboard/api and keep a key from being queued again). */
const KEEP_DELIVERED_MS = 14 * 24 * 60 * 60 * 1000;

function entryFile(dir: string, key: string): string {
  return join(dir, `${sha256Hex(key)}.json`);
}

function isOutboxEntry(value: unknown): value is OutboxEntry {
  const v = value as Partial<OutboxEntry> | null;
  return typeof v?.idempotency_key === 'string' && typeof v.run_id === 'string' && typeof v.seq === 'number' && typeof v.payload === 'object';
}

/**
 * Durable at-least-once delivery of gate callbacks. An entry is written before any attempt and is keyed by its
 * idempotency key, so a callback is enqueued once however often the gate (or a restarted gate) asks, and once a
 * 2xx came back it is never sent again. One attempt tries each replica's URL in turn, starting with the one that
 * took the last callback, until one answers 2xx; when none does, retries back off exponentially.
 */
export class CallbackOutbox {
  private readonly entries = new Map<string, OutboxEntry>();
  private nextSeq = 1;
  private timer: NodeJS.Timeout | undefined;
  private pumping: Promise<void> | undefined;
  private repumpRequested = false;
  private stopped = true;
  private readonly inFlight = new Set<AbortController>();
  /** Index into options.urls of the replica that took the last callback: a dead one is not asked first every time. */
  private preferred = 0;

  private readonly options: CallbackOutboxOptions;

  constructor(options: CallbackOutboxOptions) {
    this.options = options;
  }

  /** Reads the entries a previous process left; pending ones are sent once `start` runs. */
  load(): void {
    const files = readJsonDir(this.options.dir, (file, error) =>
      this.options.logger.warn({ file, err: error }, 'skipping an unreadable outbox entry'),
    );
    for (const { file, value } of files) {
      if (!isOutboxEntry(value)) continue;
      if (value.delivered_at !== null && Date.now() - Date.parse(value.delivered_at) > KEEP_DELIVERED_MS) {
        rmSync(file, { force: true });
        continue;
      }
      this.entries.set(value.idempotency_key, value);
      this.nextSeq = Math.max(this.nextSeq, value.seq + 1);
    }
  }

  /** Writes the callback to disk, then sends it. Returns false when an entry with the same key already exists. */
  enqueue(payload: GateCallbackPayload): boolean {
    const key = payload.idempotency_key;
    if (this.entries.has(key)) return false;
    const now = new Date().toISOString();
    const entry: OutboxEntry = {
      idempotency_key: key,
      run_id: payload.run_id,
      event_type: payload.event_type,
      seq: this.nextSeq++,
      payload: { ...payload, delivered_at: null },
      created_at: now,
      attempts: 0,
      next_attempt_at: now,
      last_status: null,
      last_error: null,
      delivered_at: null,
    };
    if (!createJsonExclusive(entryFile(this.options.dir, key), entry)) return false;
    this.entries.set(key, entry);
    this.options.logger.info({ idempotency_key: key, event_type: entry.event_type, run_id: entry.run_id }, 'callback queued');
    this.options.onQueued?.(payload);
    this.kick();
    return true;
  }

  start(): void {
    this.stopped = false;
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    for (const controller of this.inFlight) controller.abort();
    await this.pumping;
  }

  pendingCount(): number {
    let count = 0;
    for (const entry of this.entries.values()) if (entry.delivered_at === null) count++;
    return count;
  }

  list(): OutboxEntry[] {
    return [...this.entries.values()].sort((a, b) => a.seq - b.seq);
  }

  private kick(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.repumpRequested = true;
      return;
    }
    clearTimeout(this.timer);
    this.pumping = this.pump().finally(() => {
      this.pumping = undefined;
      if (this.repumpRequested) {
        this.repumpRequested = false;
        this.kick();
      } else {
        this.scheduleNext();
      }
    });
  }

  private scheduleNext(): void {
    if (this.stopped) return;
    const due = this.list()
      .filter((entry) => entry.delivered_at === null)
      .map((entry) => Date.parse(entry.next_attempt_at));
    if (due.length === 0) return;
    const delay = Math.max(0, Math.min(...due) - Date.now());
    this.timer = setTimeout(() => this.kick(), delay);
    this.timer.unref();
  }

  /** One pass over the due entries, oldest first; a run's later callback waits until its earlier ones went out. */
  private async pump(): Promise<void> {
    const blockedRuns = new Set<string>();
    for (const entry of this.list()) {
      if (this.stopped) return;
      if (entry.delivered_at !== null) continue;
      if (blockedRuns.has(entry.run_id) || Date.parse(entry.next_attempt_at) > Date.now()) {
        blockedRuns.add(entry.run_id);
        continue;
      }
      const delivered = await this.attempt(entry);
      if (!delivered) blockedRuns.add(entry.run_id);
    }
  }

  private async attempt(entry: OutboxEntry): Promise<boolean> {
    const deliveredAt = new Date().toISOString();
    const { urls } = this.options;
    const failures: string[] = [];
    let status: number | null = null;
    let delivered = false;
    for (let tried = 0; tried < urls.length && !delivered && !this.stopped; tried++) {
      const index = (this.preferred + tried) % urls.length;
      const sent = await this.post(urls[index]!, entry, deliveredAt);
      status = sent.status;
      if (sent.error === null) {
        delivered = true;
        this.preferred = index;
      } else {
        failures.push(urls.length > 1 ? `${new URL(urls[index]!).host}: ${sent.error}` : sent.error);
      }
    }
    const error = delivered ? null : failures.length > 0 ? failures.join('; ') : 'aborted: the gate is stopping';

    entry.attempts += 1;
    entry.last_status = status;
    entry.last_error = error;
    if (error === null) {
      entry.delivered_at = deliveredAt;
      entry.payload = { ...entry.payload, delivered_at: deliveredAt };
    } else {
      entry.next_attempt_at = new Date(Date.now() + this.retryDelayMs(entry.attempts)).toISOString();
    }
    writeJsonAtomic(entryFile(this.options.dir, entry.idempotency_key), entry);
    const fields = { idempotency_key: entry.idempotency_key, attempts: entry.attempts, status };
    if (error === null) {
      this.options.logger.info(fields, 'callback delivered');
      this.options.onDelivered?.(entry);
    } else {
      this.options.logger.warn({ ...fields, error, next_attempt_at: entry.next_attempt_at }, 'callback not delivered; will retry');
    }
    return error === null;
  }

  /** One POST of the entry to one replica: its status, and why it did not take the callback (null when it did). */
  private async post(url: string, entry: OutboxEntry, deliveredAt: string): Promise<{ status: number | null; error: string | null }> {
    const controller = new AbortController();
    this.inFlight.add(controller);
    const timeout = setTimeout(() => controller.abort(), this.options.timeoutSec * 1000);
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.options.token}` },
        body: JSON.stringify({ ...entry.payload, delivered_at: deliveredAt }),
        // A moved callback URL is reported as the failure it is (and retried), never chased to another address.
        redirect: 'manual',
        signal: controller.signal,
      });
      if (response.ok) {
        await response.body?.cancel();
        return { status: response.status, error: null };
      }
      return { status: response.status, error: `HTTP ${response.status}: ${(await response.text().catch(() => '')).slice(0, ERROR_TEXT_LIMIT)}` };
    } catch (caught) {
      const error = controller.signal.aborted ? (this.stopped ? 'aborted: the gate is stopping' : `no answer within ${this.options.timeoutSec} s`) : describeFetchError(caught);
      return { status: null, error };
    } finally {
      clearTimeout(timeout);
      this.inFlight.delete(controller);
    }
  }

  private retryDelayMs(attempts: number): number {
    const base = this.options.retryBaseMs ?? DEFAULT_RETRY_BASE_MS;
    const cap = this.options.retryCapMs ?? DEFAULT_RETRY_CAP_MS;
    const exponential = Math.min(cap, base * 2 ** Math.min(attempts - 1, 20));
    // Jitter keeps several gates from retrying in lockstep against a control plane that just came back.
    return Math.round(exponential * (0.8 + Math.random() * 0.4));
  }
}

function describeFetchError(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return (cause?.code ?? cause?.message ?? (error as Error).message ?? String(error)).slice(0, ERROR_TEXT_LIMIT);
}
