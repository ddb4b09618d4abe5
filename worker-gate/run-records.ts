import { readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { RunIdSchema } from './contract/gate-endpoints.ts';
import type { GateRun } from './domain/gate-run.ts';
import { fileNameFor, readJsonDir, writeJsonAtomic } from './json-files.ts';

/** The gate's run records: in memory, each also written as one JSON file under state_dir. */
export class RunRecords {
  private readonly runs = new Map<string, GateRun>();

  private readonly dir: string;
  private readonly logger: Logger;

  constructor(dir: string, logger: Logger) {
    this.dir = dir;
    this.logger = logger;
  }

  load(): void {
    const files = readJsonDir(this.dir, (file, error) => this.logger.warn({ file, err: error }, 'skipping an unreadable run record'));
    for (const { value } of files) {
      const run = value as GateRun;
      if (typeof run?.run_id === 'string') this.runs.set(run.run_id, run);
    }
  }

  get(runId: string): GateRun | undefined {
    return this.runs.get(runId);
  }

  all(): GateRun[] {
    return [...this.runs.values()];
  }

  /** Stamps `updated_at`, writes the record and keeps it; returns the record as stored. */
  save(run: GateRun): GateRun {
    const stored = { ...run, updated_at: new Date().toISOString() };
    writeJsonAtomic(join(this.dir, fileNameFor(stored.run_id)), stored);
    this.runs.set(stored.run_id, stored);
    return stored;
  }

  /** Keeps a change in memory only: sampling details that change every tick are written with the next save. */
  keep(run: GateRun): void {
    this.runs.set(run.run_id, run);
  }

  /** Drops a record whose dispatch failed, so the control plane may try the run again. */
  remove(runId: string): void {
    this.runs.delete(runId);
    try {
      unlinkSync(join(this.dir, fileNameFor(runId)));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

/** How many cancels of runs the gate never saw it remembers: the oldest is forgotten first. */
export const MAX_CANCELS_BEFORE_DISPATCH = 1_000;

const CancelBeforeDispatchSchema = z.object({ run_id: RunIdSchema, cancelled_at: z.string() });

/**
 * Cancels of runs the gate had no record of: the control plane's cancel can overtake its own dispatch on the way here
 * (a slow network, a gate busy before it records the run), and that dispatch, landing later, must not start an agent
 * the control plane already counts as stopped. Kept in one file under state_dir, so a restart between the two keeps
 * the refusal, and bounded, oldest first out.
 */
export class CancelsBeforeDispatch {
  private readonly cancelled = new Map<string, string>();

  private readonly path: string;
  private readonly logger: Logger;

  constructor(path: string, logger: Logger) {
    this.path = path;
    this.logger = logger;
  }

  load(): void {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    let listed: unknown;
    try {
      listed = JSON.parse(text);
    } catch {
      listed = undefined;
    }
    // Starting without the list would let the late dispatch of a cancelled run start its agent: an operator decides.
    if (!Array.isArray(listed)) {
      throw new Error(
        `${this.path} is not a JSON list: it holds the runs cancelled before their dispatch reached this gate, whose late dispatches must be refused; delete it to start the gate (those dispatches would then be started)`,
      );
    }
    // Entry by entry, so one bad entry (or more entries than kept) does not lose the others.
    const entries = listed.flatMap((entry) => {
      const parsed = CancelBeforeDispatchSchema.safeParse(entry);
      return parsed.success ? [parsed.data] : [];
    });
    if (entries.length < listed.length) {
      this.logger.warn({ file: this.path, skipped: listed.length - entries.length }, 'skipping entries of the runs cancelled before their dispatch that are not a run id and a time');
    }
    for (const entry of entries.slice(-MAX_CANCELS_BEFORE_DISPATCH)) this.cancelled.set(entry.run_id, entry.cancelled_at);
  }

  /** When the run was cancelled before the gate saw its dispatch; undefined when it was not. */
  cancelledAt(runId: string): string | undefined {
    return this.cancelled.get(runId);
  }

  remember(runId: string): string {
    const known = this.cancelled.get(runId);
    if (known) return known;
    const at = new Date().toISOString();
    this.cancelled.set(runId, at);
    for (const oldest of this.cancelled.keys()) {
      if (this.cancelled.size <= MAX_CANCELS_BEFORE_DISPATCH) break;
      this.cancelled.delete(oldest);
    }
    try {
      writeJsonAtomic(this.path, [...this.cancelled].map(([run_id, cancelled_at]) => ({ run_id, cancelled_at })));
    } catch (error) {
      // The cancel still holds while this process runs; only a restart before the next successful write forgets it.
      this.logger.error({ file: this.path, run_id: runId, err: error }, 'could not write the list of runs cancelled before their dispatch: this cancel is kept in memory only');
    }
    return at;
  }
}
