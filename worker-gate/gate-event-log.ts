import { appendFileSync, mkdirSync, readFileSync, renameSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/** One entry of the gate's own history, shown by `/dashboard/api`. */
export interface GateEvent {
  at: string;
  kind: string;
  run_id: string | null;
  [field: string]: unknown;
}

const KEEP_IN_MEMORY = 1000;
const ROTATE_AT_BYTES = 10 * 1024 * 1024;

/**
 * Append-only JSON-lines history under state_dir. Each entry is one short write, so a crash loses at most the line
 * being written; a torn last line is skipped when the log is read back. With `persist` false (config log_events)
 * nothing is read or written: only the running process's recent events are kept, in memory.
 */
export class GateEventLog {
  private readonly recent: GateEvent[] = [];

  private readonly path: string;
  private readonly persist: boolean;

  constructor(path: string, persist = true) {
    this.path = path;
    this.persist = persist;
  }

  load(): void {
    if (!this.persist) return;
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    let text = '';
    try {
      if (statSync(this.path).size > ROTATE_AT_BYTES) renameSync(this.path, `${this.path}.1`);
      else text = readFileSync(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    for (const line of text.split('\n').slice(-KEEP_IN_MEMORY - 1)) {
      if (!line.trim()) continue;
      try {
        this.remember(JSON.parse(line) as GateEvent);
      } catch {
        // torn line from a crash
      }
    }
  }

  append(kind: string, runId: string | null, fields: Record<string, unknown> = {}): GateEvent {
    const event: GateEvent = { at: new Date().toISOString(), kind, run_id: runId, ...fields };
    if (this.persist) appendFileSync(this.path, `${JSON.stringify(event)}\n`, { mode: 0o600 });
    this.remember(event);
    return event;
  }

  /** Newest first. */
  latest(limit: number): GateEvent[] {
    return this.recent.slice(-limit).reverse();
  }

  private remember(event: GateEvent): void {
    this.recent.push(event);
    if (this.recent.length > KEEP_IN_MEMORY) this.recent.splice(0, this.recent.length - KEEP_IN_MEMORY);
  }
}
