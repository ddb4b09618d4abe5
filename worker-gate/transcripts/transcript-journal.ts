import { closeSync, constants, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Hex } from '../../platform/http/tokens.ts';
import { TranscriptEntrySchema, type TranscriptEntry } from '../contract/run-transcript.ts';
import { writeJsonAtomic } from '../json-files.ts';
import type { StreamTailCursor } from './stream-tail.ts';

/** What the gate keeps beside a run's journal: how far the control plane holds it, and where the tool stream was read to. */
export interface JournalCursor {
  run_id: string;
  stored_through: number;
  /** The seq the next entry gets: kept here once the journal's entries are let go. */
  next_seq?: number;
  tail: StreamTailCursor | null;
}

const { O_WRONLY, O_CREAT, O_APPEND, O_NOFOLLOW } = constants;

/**
 * One run's transcript as the gate numbered it, appended to `<dir>/<digest of the run id>.jsonl` (the gate's state,
 * private to it) before it is pushed, so a restarted gate pushes what the control plane had not yet taken. The
 * entries the control plane has not confirmed stay in memory too; they are at most TRANSCRIPT_CAPS.entriesPerRun.
 */
export class TranscriptJournal {
  readonly runId: string;
  nextSeq: number;
  storedThrough: number;
  pending: TranscriptEntry[];
  private fd: number | null = null;
  private readonly base: string;

  private constructor(dir: string, runId: string, entries: TranscriptEntry[], storedThrough: number, nextSeq = 1) {
    this.runId = runId;
    this.base = join(dir, sha256Hex(runId));
    this.nextSeq = Math.max(nextSeq, (entries.at(-1)?.seq ?? 0) + 1);
    this.storedThrough = storedThrough;
    this.pending = entries.filter((entry) => entry.seq > storedThrough);
  }

  static create(dir: string, runId: string): TranscriptJournal {
    return new TranscriptJournal(dir, runId, [], 0);
  }

  /** The journal a previous process left for the cursor's run; lines that do not parse (a torn last write) are dropped. */
  static reopen(dir: string, cursor: JournalCursor): TranscriptJournal {
    let text = '';
    try {
      text = readFileSync(`${join(dir, sha256Hex(cursor.run_id))}.jsonl`, 'utf8');
    } catch {
      // No entry was written.
    }
    const entries: TranscriptEntry[] = [];
    for (const line of text.split('\n')) {
      if (line === '') continue;
      try {
        const entry = TranscriptEntrySchema.safeParse(JSON.parse(line));
        if (entry.success && entry.data.seq === (entries.at(-1)?.seq ?? 0) + 1) entries.push(entry.data);
      } catch {
        // torn
      }
    }
    return new TranscriptJournal(dir, cursor.run_id, entries, cursor.stored_through, cursor.next_seq);
  }

  append(entries: readonly TranscriptEntry[]): void {
    if (entries.length === 0) return;
    this.fd ??= openSync(`${this.base}.jsonl`, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0o600);
    writeSync(this.fd, entries.map((entry) => `${JSON.stringify(entry)}\n`).join(''));
    this.pending.push(...entries);
  }

  /** The control plane holds every entry through `seq`. */
  stored(seq: number): void {
    if (seq <= this.storedThrough) return;
    this.storedThrough = seq;
    this.pending = this.pending.filter((entry) => entry.seq > seq);
  }

  saveCursor(tail: StreamTailCursor | null): void {
    writeJsonAtomic(`${this.base}.json`, { run_id: this.runId, stored_through: this.storedThrough, next_seq: this.nextSeq, tail } satisfies JournalCursor);
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  /** Lets go of the entries, all held by the control plane; the cursor keeps the next seq for what the run may still add. */
  compact(): void {
    if (this.pending.length > 0) return;
    this.saveCursor(null);
    this.close();
    rmSync(`${this.base}.jsonl`, { force: true });
  }

  /** Forgets the run: the gate no longer holds it, and the control plane holds its whole transcript. */
  remove(): void {
    this.close();
    rmSync(`${this.base}.jsonl`, { force: true });
    rmSync(`${this.base}.json`, { force: true });
  }
}

export function isJournalCursor(value: unknown): value is JournalCursor {
  const cursor = value as Partial<JournalCursor> | null;
  return typeof cursor?.run_id === 'string' && typeof cursor.stored_through === 'number';
}
