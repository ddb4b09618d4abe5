import { mkdirSync } from 'node:fs';
import type { Logger } from 'pino';
import type { LaunchedRuntime } from '../contract/agent-runtimes.ts';
import { RUN_OVER_GATE_STATES } from '../contract/gate-names.ts';
import { TRANSCRIPT_CAPS, TranscriptPushAnswerSchema, capTranscriptText, type TranscriptDraft, type TranscriptEntry } from '../contract/run-transcript.ts';
import type { GateRun } from '../domain/gate-run.ts';
import { readJsonDir } from '../json-files.ts';
import { secretRedactor } from './secret-redactor.ts';
import { StreamTail, streamNow } from './stream-tail.ts';
import { TranscriptJournal, isJournalCursor } from './transcript-journal.ts';

export interface RunTranscriptsOptions {
  /** `<state_dir>/worker-gate/transcripts`: the gate's own, out of every agent's reach. */
  dir: string;
  /** The control plane's transcript URLs, one beside each completion callback URL. */
  urls: readonly string[];
  /** completion_callback_token: the control plane takes transcripts with it, as it takes callbacks. */
  token: string;
  timeoutSec: number;
  logger: Logger;
  /** The gate's secrets and the credential values it passes on: never sent in a transcript. */
  secrets: readonly string[];
  /** The gate's record of a run (its event token's digest, its state), or undefined once the gate forgot it. */
  runOf: (runId: string) => GateRun | undefined;
  /** How often the tool streams are read and new entries pushed; 250 ms keeps a tool call within a second of the page. */
  passIntervalMs?: number;
}

interface RunTranscript {
  journal: TranscriptJournal;
  tail: StreamTail | null;
  pushing: boolean;
  failures: number;
  retryAt: number;
  /** The control plane refused the run (it does not know it): nothing more is sent for it. */
  refused: boolean;
  /** The run is over and its journal's entries let go (TranscriptJournal.compact). */
  compacted?: boolean;
}

const DEFAULT_PASS_INTERVAL_MS = 250;
const RETRY_CAP_MS = 30_000;
const ERROR_TEXT_LIMIT = 300;

/** The URL of the control plane's transcript route beside a completion callback URL (`…/worker-callback` → `…/worker-transcript`). */
export const transcriptUrlBeside = (callbackUrl: string): string => new URL('worker-transcript', callbackUrl).href;

/**
 * Every run's transcript on this gate (docs/runs.md#following-a-run-live): the entries the agent's tool stream, its
 * lifecycle events and the gate's own reports give, numbered, bounded, stripped of secrets, journaled, and pushed to
 * the control plane at least once, in order, each run from where the control plane said it holds it.
 */
export class RunTranscripts {
  private readonly transcripts = new Map<string, RunTranscript>();
  /** Entries given to append, recorded on the next turn of the event loop. */
  private readonly queued: { runId: string; drafts: TranscriptDraft[] }[] = [];
  private readonly redact: (text: string, eventTokenSha256?: string) => string;
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  /** Aborts the pushes out when the gate stops, rather than waiting on each for up to its timeout. */
  private stopping = new AbortController();
  private stopped = true;
  private preferred = 0;
  private readonly options: RunTranscriptsOptions;

  constructor(options: RunTranscriptsOptions) {
    this.options = options;
    this.redact = secretRedactor(options.secrets);
  }

  /** Takes up the transcripts a previous process left: their unsent entries, and the tool streams of runs still going. */
  load(): void {
    mkdirSync(this.options.dir, { recursive: true, mode: 0o700 });
    const cursors = readJsonDir(this.options.dir, (file, error) => this.options.logger.warn({ file, err: error }, 'skipping an unreadable transcript cursor'));
    for (const { value } of cursors) {
      if (!isJournalCursor(value)) continue;
      const journal = TranscriptJournal.reopen(this.options.dir, value);
      const tail = value.tail && this.isGoing(value.run_id) ? new StreamTail(value.tail) : null;
      this.transcripts.set(value.run_id, { journal, tail, pushing: false, failures: 0, retryAt: 0, refused: false });
    }
  }

  start(): void {
    this.stopped = false;
    this.stopping = new AbortController();
    this.timer = setInterval(() => this.pass(), this.options.passIntervalMs ?? DEFAULT_PASS_INTERVAL_MS);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.appendQueued();
    this.stopping.abort();
    await Promise.all(this.inFlight);
    for (const transcript of this.transcripts.values()) {
      transcript.journal.saveCursor(transcript.tail?.cursor ?? null);
      transcript.tail?.close();
      transcript.journal.close();
    }
  }

  /**
   * Adds entries to the run's transcript and pushes them, just after the caller's own work: an agent's hook waits on
   * the gate's answer to its event (within the tool's hook timeout), and the journal write and the push need not hold
   * it. Entries keep the order they were given in.
   */
  append(runId: string, drafts: readonly TranscriptDraft[]): void {
    if (drafts.length === 0) return;
    const at = new Date().toISOString();
    this.queued.push({ runId, drafts: drafts.map((draft) => ({ ...draft, at: draft.at ?? at })) });
    if (this.queued.length === 1) setImmediate(() => this.appendQueued());
  }

  private appendQueued(): void {
    const queued = this.queued.splice(0);
    for (const { runId, drafts } of queued) this.record(runId, drafts);
  }

  private record(runId: string, drafts: readonly TranscriptDraft[]): void {
    const transcript = this.transcriptOf(runId);
    const { journal } = transcript;
    const digest = this.options.runOf(runId)?.event_token_sha256;
    const now = new Date().toISOString();
    const entries: TranscriptEntry[] = [];
    for (const draft of drafts) {
      if (journal.nextSeq > TRANSCRIPT_CAPS.entriesPerRun + 1) break;
      const last = journal.nextSeq === TRANSCRIPT_CAPS.entriesPerRun + 1;
      entries.push({
        seq: journal.nextSeq++,
        at: draft.at ?? now,
        kind: last ? 'lifecycle' : draft.kind,
        tool: last ? null : (draft.tool?.slice(0, TRANSCRIPT_CAPS.toolChars) ?? null),
        text: last
          ? `the transcript is cut here: a run keeps at most ${TRANSCRIPT_CAPS.entriesPerRun} entries (the gate's records of the project hold the tool's whole stream)`
          : capTranscriptText(this.redact(draft.text, digest)),
      });
    }
    journal.append(entries);
    transcript.compacted = false;
    if (entries.length > 0) this.push(runId, transcript);
  }

  /**
   * The gate started a session of the run under a real tool (a dispatch, a resume, a continuation): its stream is
   * followed from the start of what this session writes.
   */
  launched(runId: string, runtime: LaunchedRuntime, recordsPath: string): void {
    const transcript = this.transcriptOf(runId);
    if (transcript.tail && transcript.tail.cursor.records_path === recordsPath) transcript.tail.relaunched();
    else {
      transcript.tail?.close();
      transcript.tail = new StreamTail({ runtime, records_path: recordsPath, offset: 0, stale: streamNow(recordsPath) });
    }
    transcript.journal.saveCursor(transcript.tail.cursor);
  }

  /** Entries of every run the control plane has not confirmed. */
  pendingCount(): number {
    let count = 0;
    for (const transcript of this.transcripts.values()) count += transcript.journal.pending.length;
    return count;
  }

  private transcriptOf(runId: string): RunTranscript {
    let transcript = this.transcripts.get(runId);
    if (!transcript) {
      transcript = { journal: TranscriptJournal.create(this.options.dir, runId), tail: null, pushing: false, failures: 0, retryAt: 0, refused: false };
      this.transcripts.set(runId, transcript);
    }
    return transcript;
  }

  private isGoing(runId: string): boolean {
    const run = this.options.runOf(runId);
    return run !== undefined && !RUN_OVER_GATE_STATES.has(run.gate_state);
  }

  /** One pass: reads the tool streams, pushes what is unsent, and lets go of runs that are over and wholly sent. */
  private pass(): void {
    this.appendQueued();
    for (const [runId, transcript] of this.transcripts) {
      if (transcript.tail) {
        try {
          const read = transcript.tail.read();
          if (read.length > 0) this.record(runId, read);
        } catch (error) {
          this.options.logger.warn({ run_id: runId, err: error }, "could not read the run's tool stream");
        }
        if (!this.isGoing(runId)) {
          transcript.tail.close();
          transcript.tail = null;
          transcript.journal.saveCursor(null);
        }
      }
      this.push(runId, transcript);
      if (transcript.tail || transcript.pushing || transcript.journal.pending.length > 0) continue;
      if (this.options.runOf(runId) === undefined) {
        transcript.journal.remove();
        this.transcripts.delete(runId);
      } else if (!this.isGoing(runId) && !transcript.compacted) {
        transcript.journal.compact();
        transcript.compacted = true;
      }
    }
  }

  private push(runId: string, transcript: RunTranscript): void {
    if (transcript.refused) transcript.journal.stored(transcript.journal.nextSeq - 1);
    if (this.stopped || transcript.pushing || transcript.refused || transcript.journal.pending.length === 0 || Date.now() < transcript.retryAt) return;
    transcript.pushing = true;
    const sending = this.send(runId, transcript).finally(() => {
      transcript.pushing = false;
      this.inFlight.delete(sending);
      // What came while this push was out goes at once, not at the next pass.
      if (transcript.failures === 0) this.push(runId, transcript);
    });
    this.inFlight.add(sending);
  }

  private async send(runId: string, transcript: RunTranscript): Promise<void> {
    const entries = transcript.journal.pending.slice(0, TRANSCRIPT_CAPS.entriesPerPush);
    const body = JSON.stringify({ run_id: runId, entries });
    const { urls } = this.options;
    const failures: string[] = [];
    for (let tried = 0; tried < urls.length && !this.stopped; tried++) {
      const index = (this.preferred + tried) % urls.length;
      try {
        const response = await fetch(urls[index]!, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${this.options.token}` },
          body,
          signal: AbortSignal.any([this.stopping.signal, AbortSignal.timeout(this.options.timeoutSec * 1000)]),
        });
        const answer = await response.json().catch(() => null);
        if (response.status === 404) {
          transcript.refused = true;
          this.options.logger.warn({ run_id: runId, url: urls[index] }, "the control plane does not know the run: its transcript is not sent");
          return;
        }
        if (!response.ok) {
          failures.push(`HTTP ${response.status}`);
          continue;
        }
        const parsed = TranscriptPushAnswerSchema.safeParse(answer);
        this.preferred = index;
        transcript.failures = 0;
        transcript.journal.stored(parsed.success ? parsed.data.stored_through : entries.at(-1)!.seq);
        transcript.journal.saveCursor(transcript.tail?.cursor ?? null);
        return;
      } catch (error) {
        failures.push(error instanceof Error ? error.message : String(error));
      }
    }
    transcript.failures += 1;
    transcript.retryAt = Date.now() + Math.min(RETRY_CAP_MS, 500 * 2 ** (transcript.failures - 1));
    if (transcript.failures === 1 || transcript.failures % 10 === 0) {
      this.options.logger.warn({ run_id: runId, attempts: transcript.failures, error: failures.join('; ').slice(0, ERROR_TEXT_LIMIT) }, 'transcript entries not delivered; will retry');
    }
  }
}
