/**
 * Codex's running token usage. Its `--json` stream reports usage only when a turn completes, which in exec is when the
 * agent is done; the session's rollout file (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl`)
 * gets a `token_usage_record` line within milliseconds of every model response, with the session's total so far
 * (`thread_token_usage`). The `token_count` event that also carries that total comes only once the answer's tool call
 * has ended: a model answer that asks for a long command would be counted only after it, and the agent's next model
 * request with it. The launcher reads both, whichever comes first, to stop an agent past its token budget while it
 * works.
 *
 * The file is found by its session id, opened once (O_NOFOLLOW: a link put in its place is refused) and read from that
 * handle as it grows, a bounded amount per poll. A resumed session appends to its earlier file: what the session had
 * spent before this invocation started is subtracted, so the budget counts this run's tokens alone. Only what the file
 * held when it was first opened can say what was spent before: a "before" line that appears later (an agent that can
 * write the tool's home may append one, dated in the past, to make its spending look small) is ignored. And the
 * running total never goes down, so a forged smaller total changes nothing either.
 */
import { closeSync, constants, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { TokenUsage } from '../contract/agent-runtimes.ts';

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = constants;
/** Bytes read per poll, and the longest line kept: a token_count line is a few hundred bytes. */
const READ_PER_POLL = 1024 * 1024;
const MAX_LINE = 64 * 1024;
/** Directory entries looked at while finding the file: sessions pile up by day. */
const MAX_ENTRIES_VISITED = 5_000;

interface Totals {
  input: number;
  output: number;
}

export class CodexRolloutUsage {
  private fd: number | null = null;
  private offset = 0;
  /** The file's size when it was opened: lines that end beyond it were written during this invocation. */
  private sizeAtOpen = 0;
  private partial = '';
  private before: Totals = { input: 0, output: 0 };
  private latest: Totals | null = null;
  private readonly sessionsDir: string;
  private readonly startedAt: string;

  constructor(codexHome: string, startedAt: string) {
    this.sessionsDir = join(codexHome, 'sessions');
    this.startedAt = startedAt;
  }

  /** Reads what the file gained since the last poll; answers this invocation's usage so far, or null when none is known. */
  poll(sessionId: string | null): TokenUsage | null {
    if (this.fd === null) {
      const path = sessionId ? findRollout(this.sessionsDir, sessionId) : null;
      if (!path) return null;
      try {
        this.fd = openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
        const info = fstatSync(this.fd);
        if (!info.isFile()) throw new Error('not a regular file');
        this.sizeAtOpen = info.size;
      } catch {
        this.close();
        return null;
      }
    }
    const buffer = Buffer.alloc(64 * 1024);
    let read = 0;
    while (read < READ_PER_POLL) {
      const n = readSync(this.fd, buffer, 0, buffer.length, this.offset);
      if (n === 0) break;
      read += n;
      this.take(buffer.subarray(0, n).toString('utf8'), this.offset);
      this.offset += n;
    }
    if (!this.latest) return null;
    const input = Math.max(0, this.latest.input - this.before.input);
    const output = Math.max(0, this.latest.output - this.before.output);
    return { input_tokens: input, output_tokens: output, total_tokens: input + output };
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  /** Takes `text`, read at byte `at` of the file. */
  private take(text: string, at: number): void {
    // Where each whole line ends in the file, to tell what the file held at open from what came after.
    let end = at - Buffer.byteLength(this.partial);
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    if (this.partial.length > MAX_LINE) this.partial = '';
    for (const line of lines) {
      end += Buffer.byteLength(line) + 1;
      if (!line.includes('"token_count"') && !line.includes('"token_usage_record"')) continue;
      const totals = sessionTotals(line);
      if (!totals) continue;
      if (totals.at < this.startedAt) {
        if (end <= this.sizeAtOpen) this.before = totals;
      } else {
        this.latest = this.latest ? { input: Math.max(this.latest.input, totals.input), output: Math.max(this.latest.output, totals.output) } : totals;
      }
    }
  }
}

/** The session's total so far, from a `token_usage_record` line or a `token_count` event; null for any other line. */
function sessionTotals(line: string): (Totals & { at: string }) | null {
  try {
    const record = JSON.parse(line) as {
      timestamp?: unknown;
      type?: unknown;
      payload?: { type?: unknown; info?: { total_token_usage?: Record<string, unknown> } | null; thread_token_usage?: Record<string, unknown> | null };
    };
    const total =
      record.type === 'token_usage_record'
        ? record.payload?.thread_token_usage
        : record.type === 'event_msg' && record.payload?.type === 'token_count'
          ? record.payload.info?.total_token_usage
          : undefined;
    if (!total || typeof total !== 'object' || typeof record.timestamp !== 'string') return null;
    const count = (name: string) => (typeof total[name] === 'number' && Number.isFinite(total[name]) ? Math.max(0, Math.round(total[name])) : 0);
    return { at: record.timestamp, input: count('input_tokens'), output: count('output_tokens') };
  } catch {
    return null;
  }
}

/** The newest day directories first; null when no file of the session is there (yet). */
function findRollout(sessionsDir: string, sessionId: string): string | null {
  let visited = 0;
  const entries = (dir: string): string[] => {
    try {
      const names = readdirSync(dir).sort().reverse();
      visited += names.length;
      return names;
    } catch {
      return [];
    }
  };
  const suffix = `-${sessionId}.jsonl`;
  for (const year of entries(sessionsDir)) {
    for (const month of entries(join(sessionsDir, year))) {
      for (const day of entries(join(sessionsDir, year, month))) {
        if (visited > MAX_ENTRIES_VISITED) return null;
        const found = entries(join(sessionsDir, year, month, day)).find((name) => name.startsWith('rollout-') && name.endsWith(suffix));
        if (found) return join(sessionsDir, year, month, day, found);
      }
    }
  }
  return null;
}
