import { unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { GateRun } from '../domain/gate-run.ts';
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
