import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { AGENT_SESSION_ID } from '../../domain/agent-runtimes.ts';
import type { PinnedDir } from '../../files/pinned-dir.ts';

/**
 * What a launcher records under `<project>/.research/agent/` (README "Running real agents"): `session.json` (the
 * last session: its id, how it ended, its token usage), the tool's event stream `events.jsonl`, and `stderr.log`.
 */
export const AGENT_RECORDS_DIR = '.research/agent';
const SESSION_RECORD = `${AGENT_RECORDS_DIR}/session.json`;
const MAX_SESSION_RECORD_BYTES = 256 * 1024;

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
  started_at: z.string(),
  ended_at: z.string(),
});
export type AgentSessionRecord = z.output<typeof AgentSessionRecordSchema>;

/** The records directory of a project, created when missing. */
export function agentRecordsDir(projectDir: string): string {
  const dir = join(projectDir, AGENT_RECORDS_DIR);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/**
 * The session a resume continues: the id in the project's last session record, read once through the pinned project
 * (files/pinned-dir.ts) since the agent can write there; null when there is none or it is not a record of `runtime`.
 */
export function lastRecordedSession(project: PinnedDir, runtime: string): string | null {
  let bytes: Buffer | null;
  try {
    bytes = project.readFileIfExists(SESSION_RECORD, MAX_SESSION_RECORD_BYTES);
  } catch {
    return null;
  }
  if (bytes === null) return null;
  try {
    const record = AgentSessionRecordSchema.safeParse(JSON.parse(bytes.toString('utf8')));
    return record.success && record.data.runtime === runtime ? record.data.session_id : null;
  } catch {
    return null;
  }
}
