import { closeSync, constants, fstatSync, lstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { LaunchedRuntime, TokenUsage } from '../contract/agent-runtimes.ts';
import type { TranscriptDraft } from '../contract/run-transcript.ts';
import { AGENT_RECORD_FILES } from '../launchers/records.ts';
import { claudeCodeLauncher } from '../launchers/claude-code.ts';
import { codexLauncher } from '../launchers/codex.ts';
import type { AgentStreamState } from '../launchers/runtime-launcher.ts';
import { streamTranscriptReader, type StreamTranscriptReader } from '../launchers/stream-transcript.ts';

/** Where a run's tool stream is read from, and how far: kept with the run's transcript, so a restarted gate goes on. */
export interface StreamTailCursor {
  runtime: LaunchedRuntime;
  /** The gate's records of the run's project (launchers/records.ts), where the runner keeps the tool's stream. */
  records_path: string;
  offset: number;
  /**
   * The stream as it was when the session was launched: an earlier session's, not read. Once it differs (the runner
   * opened it fresh, the tool wrote), it is read from its start. Null when there was none.
   */
  stale: { size: number; mtime_ms: number } | null;
}

/** Bytes read from the stream per run and pass: a burst is taken over a few passes, not in one large read. */
const READ_CHUNK_BYTES = 256 * 1024;
/** A line longer than this is not a line of the tool's stream: it is skipped. */
const MAX_LINE_BYTES = 1024 * 1024;

const STREAM_READERS = { codex: codexLauncher, 'claude-code': claudeCodeLauncher } as const;
const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = constants;

const usageText = (usage: TokenUsage) =>
  `${usage.total_tokens.toLocaleString('en-US')} tokens so far (input ${usage.input_tokens.toLocaleString('en-US')}, output ${usage.output_tokens.toLocaleString('en-US')})`;

/** The size and time of the stream kept in `recordsPath`, or null when there is none. */
export function streamNow(recordsPath: string): { size: number; mtime_ms: number } | null {
  try {
    const stat = lstatSync(join(recordsPath, AGENT_RECORD_FILES.events));
    return { size: stat.size, mtime_ms: stat.mtimeMs };
  } catch {
    return null;
  }
}

/**
 * Follows the tool stream (`events.jsonl`) the gate's runner keeps for a run's project, from where it last read. The
 * file is the gate's own, in its private records; it is opened without following a link and kept open while the run
 * lasts. A new session of the project empties it (the runner opens it fresh), which is seen as a file shorter than
 * what was read.
 */
export class StreamTail {
  readonly cursor: StreamTailCursor;
  private fd: number | null = null;
  private reader: StreamTranscriptReader;
  private readonly stream: AgentStreamState = { sessionId: null, lastMessage: null, lastError: null, tokenUsage: null };
  private reportedTokens = 0;
  private partial = Buffer.alloc(0);

  constructor(cursor: StreamTailCursor) {
    this.cursor = cursor;
    this.reader = streamTranscriptReader(cursor.runtime);
  }

  /** The entries of the lines written since the last read. */
  read(): TranscriptDraft[] {
    const fd = this.open();
    if (fd === null) return [];
    const stat = fstatSync(fd);
    const { stale } = this.cursor;
    if (stale && stat.size === stale.size && stat.mtimeMs === stale.mtime_ms) return [];
    this.cursor.stale = null;
    if (stat.size < this.cursor.offset) this.restart();
    if (stat.size === this.cursor.offset) return [];
    const chunk = Buffer.alloc(Math.min(READ_CHUNK_BYTES, stat.size - this.cursor.offset));
    const read = readSync(fd, chunk, 0, chunk.length, this.cursor.offset);
    this.cursor.offset += read;
    let text = Buffer.concat([this.partial, chunk.subarray(0, read)]);
    const lastNewline = text.lastIndexOf(0x0a);
    if (lastNewline === -1) {
      this.partial = text.length > MAX_LINE_BYTES ? Buffer.alloc(0) : text;
      return [];
    }
    this.partial = Buffer.from(text.subarray(lastNewline + 1));
    if (this.partial.length > MAX_LINE_BYTES) this.partial = Buffer.alloc(0);
    text = text.subarray(0, lastNewline);
    const entries: TranscriptDraft[] = [];
    for (const line of text.toString('utf8').split('\n')) {
      entries.push(...this.reader.read(line));
      STREAM_READERS[this.cursor.runtime].readStreamLine(line, this.stream);
      const usage = this.stream.tokenUsage;
      if (usage && usage.total_tokens !== this.reportedTokens) {
        this.reportedTokens = usage.total_tokens;
        entries.push({ kind: 'usage', tool: null, text: usageText(usage) });
      }
    }
    return entries;
  }

  /** The runner starts a new session of the run: the stream is read from its start once the runner has emptied it. */
  relaunched(): void {
    this.cursor.stale = streamNow(this.cursor.records_path);
    this.restart();
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private restart(): void {
    this.cursor.offset = 0;
    this.partial = Buffer.alloc(0);
    this.reader = streamTranscriptReader(this.cursor.runtime);
    this.stream.tokenUsage = null;
    this.reportedTokens = 0;
  }

  private open(): number | null {
    if (this.fd !== null) return this.fd;
    let fd: number;
    try {
      fd = openSync(join(this.cursor.records_path, AGENT_RECORD_FILES.events), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch {
      // Not written yet (the runner has not started), or not a file to read: asked again next pass.
      return null;
    }
    if (!fstatSync(fd).isFile()) {
      closeSync(fd);
      return null;
    }
    this.fd = fd;
    return fd;
  }
}
