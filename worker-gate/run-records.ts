import { unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { GateSession } from '../domain/gate-lifecycle.ts';
import type { CallbackEventType, DispatchMode, ReasoningEffort } from '../domain/gate.ts';
import type { WorkloadClass } from '../domain/workload.ts';
import { fileNameFor, readJsonDir, writeJsonAtomic } from './json-files.ts';

export interface TrackedPid {
  pid: number;
  startTicks: number;
}

/** Everything the gate knows about one dispatched run; one JSON file per run under state_dir. */
export interface GateRun extends GateSession {
  run_id: string;
  project_id: string;
  project_name: string;
  project_dir: string;
  prompt_file: string;
  workload_class: WorkloadClass;
  machine_target: string | null;
  mode: DispatchMode;
  model: string;
  reasoning_effort: ReasoningEffort;
  sandbox: string;
  /** Hash of the dispatch request: a repeated /dispatch for this run must match it. */
  request_hash: string;
  /** `starting` while the dispatch script runs; a record left in that state means the gate died mid-dispatch. */
  dispatch_status: 'starting' | 'started' | 'interrupted';
  dispatched_at: string;
  dispatch_duration_ms: number | null;
  script_output: Record<string, unknown>;
  root_pid: number | null;
  root_start_ticks: number | null;
  process_group_id: number | null;
  tmux_session: string | null;
  vram_baseline_mib: number | null;
  /** Every process the gate has tracked for this run, with its start time, to tell a reused pid apart. */
  known_pids: TrackedPid[];
  alive_pids: number[];
  root_alive: boolean;
  processes_alive: boolean;
  last_process_alive_at: string | null;
  processes_exited_at: string | null;
  reaped: { pid: number; outcome: string; at: string; command: string }[];
  quiet_window: Record<string, unknown> | null;
  callbacks: { event_type: CallbackEventType; idempotency_key: string; enqueued_at: string }[];
  events_received: number;
  events_ignored: number;
  created_at: string;
  updated_at: string;
}

export class RunRecords {
  private readonly runs = new Map<string, GateRun>();

  constructor(
    private readonly dir: string,
    private readonly logger: Logger,
  ) {}

  load(): GateRun[] {
    const files = readJsonDir(this.dir, (file, error) => this.logger.warn({ file, err: error }, 'skipping an unreadable run record'));
    for (const { value } of files) {
      const run = value as GateRun;
      if (typeof run?.run_id === 'string') this.runs.set(run.run_id, run);
    }
    return this.all();
  }

  get(runId: string): GateRun | undefined {
    return this.runs.get(runId);
  }

  all(): GateRun[] {
    return [...this.runs.values()];
  }

  save(run: GateRun): void {
    run.updated_at = new Date().toISOString();
    writeJsonAtomic(join(this.dir, fileNameFor(run.run_id)), run);
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
