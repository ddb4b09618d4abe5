import { chmodSync, closeSync, constants, fstatSync, ftruncateSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { AGENT_SESSION_ID } from '../contract/agent-runtimes.ts';
import { PinnedDir } from '../../platform/files/pinned-dir.ts';
import { projectKey } from '../agent-sandbox/sandbox-paths.ts';

/**
 * Where the gate keeps what it records about a project's real agent (docs/worker-gate.md#running-real-agents): under its own
 * state_dir, private to the gate (0700), never in the project the agent writes. Per project, in
 * `<state_dir>/worker-gate/agent-records/<project key>/`: `session.json` (the last session: its id, how it ended, its
 * token usage), the tool's event stream `events.jsonl`, its `stderr.log` and the runner's own `agent.log`. The files
 * are opened through the pinned directory without following a link, each at most its own bound.
 */
export const AGENT_RECORD_FILES = { session: 'session.json', events: 'events.jsonl', stderr: 'stderr.log', agentLog: 'agent.log' } as const;
export type AgentLogFile = 'events.jsonl' | 'stderr.log' | 'agent.log';

const MAX_SESSION_RECORD_BYTES = 256 * 1024;
const { O_WRONLY, O_CREAT, O_APPEND, O_NOFOLLOW, O_NONBLOCK } = constants;


/** `<state_dir>/worker-gate/agent-records/<project key>`: the gate's records of the project's agent. */
export function agentRecordsPath(stateDir: string, projectDir: string): string {
  return join(stateDir, 'worker-gate', 'agent-records', projectKey(projectDir));
}

/**
 * `<state_dir>/agent-sandbox/tool-homes/<project key>/<runtime>`: the tool's own home (config, hooks, sessions), the
 * agent user's (the tool runs as it), beside the agents' homes and apart from the gate's records.
 */
export function agentHomePath(stateDir: string, projectDir: string, runtime: string): string {
  return join(stateDir, 'agent-sandbox', 'tool-homes', projectKey(projectDir), runtime);
}

/** Creates `path` and every missing directory above it, each one the gate creates private to it (0700). */
export function makePrivateDir(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o700 });
  chmodSync(path, 0o700);
}

const TokenUsageSchema = z.object({
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0),
});

export const AgentSessionRecordSchema = z.object({
  runtime: z.string(),
  run_id: z.string(),
  mode: z.string(),
  session_id: z.string().regex(AGENT_SESSION_ID).nullable(),
  exit_code: z.number().int(),
  signal: z.string().nullable(),
  last_message: z.string().nullable(),
  last_error: z.string().nullable(),
  token_usage: TokenUsageSchema.nullable(),
  /** The run's token budget, and whether the launcher stopped the agent past it (absent in records written before budgets). */
  token_budget: z.number().int().min(1).nullable().optional(),
  stopped_over_budget: z.boolean().optional(),
  /**
   * When the launcher sent its first stop signal to an agent past its budget: the gate's own latency, apart from the
   * time the tool then takes to end its session (`ended_at`), which a loaded machine stretches.
   */
  budget_stopped_at: z.string().nullable().optional(),
  started_at: z.string(),
  ended_at: z.string(),
});
export type AgentSessionRecord = z.output<typeof AgentSessionRecordSchema>;

/** The records directory of one project, held open (platform/files/pinned-dir.ts): every file is opened through it, once. */
export class AgentRecords {
  private readonly dir: PinnedDir;

  private constructor(dir: PinnedDir) {
    this.dir = dir;
  }

  /** Opens (creating, 0700) the records directory at `path`, which the gate named (AGENT_RECORDS). */
  static open(path: string): AgentRecords {
    makePrivateDir(path);
    return new AgentRecords(PinnedDir.open(path, '.', { allowBase: true, selfBoundary: true }));
  }

  /**
   * A log file for appending, emptied first when `fresh` (each holds the project's latest run), opened without
   * following a link at its name; a FIFO or device planted there is refused.
   */
  openLog(name: AgentLogFile, options: { fresh: boolean }): number {
    const fd = openSync(`/proc/self/fd/${this.dir.fd}/${name}`, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK, 0o600);
    try {
      if (!fstatSync(fd).isFile()) throw new Error(`${name} in ${this.dir.path} is not a regular file`);
      if (options.fresh) ftruncateSync(fd, 0);
      return fd;
    } catch (error) {
      closeSync(fd);
      throw error;
    }
  }

  writeSession(record: AgentSessionRecord): void {
    this.dir.writeFileAtomic(AGENT_RECORD_FILES.session, `${JSON.stringify(record, null, 2)}\n`, 0o600);
  }

  /** The project's last session record, or null when there is none or it does not parse. */
  readSession(): AgentSessionRecord | null {
    let bytes: Buffer | null;
    try {
      bytes = this.dir.readFileIfExists(AGENT_RECORD_FILES.session, MAX_SESSION_RECORD_BYTES);
    } catch {
      return null;
    }
    if (bytes === null) return null;
    try {
      const record = AgentSessionRecordSchema.safeParse(JSON.parse(bytes.toString('utf8')));
      return record.success ? record.data : null;
    } catch {
      return null;
    }
  }

  close(): void {
    this.dir.close();
  }
}

/** The session a resume continues: the id in the project's last session record, or null when it is not one of `runtime`. */
export function lastRecordedSession(recordsPath: string, runtime: string): string | null {
  const records = AgentRecords.open(recordsPath);
  try {
    const record = records.readSession();
    return record && record.runtime === runtime ? record.session_id : null;
  } finally {
    records.close();
  }
}
