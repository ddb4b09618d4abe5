import type { Queryable } from '../../platform/store/store.ts';
import type { TranscriptEntry } from '../../worker-gate/contract/run-transcript.ts';
import { isRunFinished, type RunState } from './domain/run-state.ts';
import { readTranscript } from './run-transcripts.ts';

/** Where a watcher's entries go: an SSE stream of the HTTP layer, or a test. */
export interface TranscriptSink {
  entries(entries: readonly TranscriptEntry[]): void;
  state(state: RunState): void;
  /** The run is finished and its transcript wholly sent. */
  end(): void;
  /** The transcript could not be read (the run is unknown, the store failed). */
  fail(error: Error): void;
}

export interface TranscriptFeedOptions {
  /** How often a watched run is read when no push arrives here: another replica may have taken it. */
  pollMs?: number;
  /** How long after a run finished its gate's last entries may still come, before its watchers are told it ended. */
  endGraceMs?: number;
}

interface Watcher {
  cursor: number;
  sink: TranscriptSink;
  state: RunState | null;
}

const PAGE = 200;

/** One watched run: its watchers share one read per push or poll, from the earliest of their places. */
class RunWatch {
  readonly watchers = new Set<Watcher>();
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  private readAgain = false;

  private readonly store: Queryable;
  private readonly runId: string;
  private readonly options: Required<TranscriptFeedOptions>;

  constructor(store: Queryable, runId: string, options: Required<TranscriptFeedOptions>) {
    this.store = store;
    this.runId = runId;
    this.options = options;
  }

  start(): void {
    this.timer = setInterval(() => this.wake(), this.options.pollMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  wake(): void {
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = true;
    void this.read()
      .catch((error: Error) => {
        for (const watcher of this.watchers) watcher.sink.fail(error);
      })
      .finally(() => {
        this.reading = false;
        if (this.readAgain && this.watchers.size > 0) {
          this.readAgain = false;
          this.wake();
        }
      });
  }

  private async read(): Promise<void> {
    for (;;) {
      if (this.watchers.size === 0) return;
      const after = Math.min(...[...this.watchers].map((watcher) => watcher.cursor));
      const page = await readTranscript(this.store, this.runId, after, PAGE);
      for (const watcher of this.watchers) {
        const fresh = page.entries.filter((entry) => entry.seq > watcher.cursor);
        if (fresh.length > 0) {
          watcher.cursor = fresh.at(-1)!.seq;
          watcher.sink.entries(fresh);
        }
        if (watcher.state !== page.run_state) {
          watcher.state = page.run_state;
          watcher.sink.state(page.run_state);
        }
      }
      if (page.has_more) continue;
      const finishedFor = Date.now() - Date.parse(page.run_updated_at);
      if (isRunFinished(page.run_state) && finishedFor >= this.options.endGraceMs) {
        for (const watcher of this.watchers) watcher.sink.end();
      }
      return;
    }
  }
}

/**
 * Live transcripts for the SSE route (docs/runs.md#following-a-run-live): each watched run is read once per push that
 * this replica takes and once per poll, however many pages and terminals watch it, and each watcher gets the entries
 * after its own place (the Last-Event-ID it reconnected with).
 */
export class TranscriptFeed {
  private readonly watches = new Map<string, RunWatch>();
  private readonly options: Required<TranscriptFeedOptions>;
  private readonly store: Queryable;

  constructor(store: Queryable, options: TranscriptFeedOptions = {}) {
    this.store = store;
    this.options = { pollMs: options.pollMs ?? 1000, endGraceMs: options.endGraceMs ?? 3000 };
  }

  /** A gate's push was stored here: the run's watchers get it now, not at the next poll. */
  pushed(runId: string): void {
    this.watches.get(runId)?.wake();
  }

  /** Sends `sink` the run's entries after `after`, then each new one, until the returned function is called. */
  watch(runId: string, after: number, sink: TranscriptSink): () => void {
    let watch = this.watches.get(runId);
    if (!watch) {
      watch = new RunWatch(this.store, runId, this.options);
      this.watches.set(runId, watch);
      watch.start();
    }
    const watcher: Watcher = { cursor: after, sink, state: null };
    watch.watchers.add(watcher);
    watch.wake();
    const owner = watch;
    return () => {
      owner.watchers.delete(watcher);
      if (owner.watchers.size > 0) return;
      owner.stop();
      if (this.watches.get(runId) === owner) this.watches.delete(runId);
    };
  }

  /** Runs watched now, for the bench and the metrics. */
  watchedRuns(): number {
    return this.watches.size;
  }
}
