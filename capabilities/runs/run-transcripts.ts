import type { Queryable } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import { storableText } from '../../platform/http/validation.ts';
import type { TranscriptEntry, TranscriptPush } from '../../worker-gate/contract/run-transcript.ts';
import type { RunState } from './domain/run-state.ts';

/**
 * A run's transcript in the ledger (docs/runs.md#following-a-run-live): the entries its worker gate pushes, kept with
 * the run, read in pages. A gate delivers at least once, so an entry already held is left as it is.
 */

export interface TranscriptPage {
  run_id: string;
  run_state: RunState;
  /** When the run's state last changed. */
  run_updated_at: string;
  entries: TranscriptEntry[];
  /** The seq to ask after for the next page; the `after` asked when the page is empty. */
  next_after: number;
  has_more: boolean;
}

interface EntryRow {
  seq: number;
  at: Date | string;
  kind: TranscriptEntry['kind'];
  tool: string | null;
  text: string;
}

const toEntry = (row: EntryRow): TranscriptEntry => ({
  seq: Number(row.seq),
  at: new Date(row.at).toISOString(),
  kind: row.kind,
  tool: row.tool,
  text: row.text,
});

async function runStateOf(q: Queryable, runId: string): Promise<{ state: RunState; updated_at: Date | string }> {
  const result = await q.query<{ state: RunState; updated_at: Date | string }>('SELECT state, updated_at FROM runs WHERE run_id = $1', [runId]);
  const run = result.rows[0];
  if (run === undefined) throw new CommandRefusedError(404, `unknown run '${runId}'`);
  return run;
}

/** Stores a gate's push; answers the highest seq held of the run, from which the gate sends on. 404 for an unknown run. */
export async function storeTranscript(q: Queryable, push: TranscriptPush): Promise<{ run_id: string; stored_through: number }> {
  await runStateOf(q, push.run_id);
  const params: unknown[] = [push.run_id];
  const rows = push.entries.map((entry) => {
    // The agent's text may hold what Postgres cannot store (NUL): replaced, never a 500.
    params.push(entry.seq, entry.at, entry.kind, entry.tool === null ? null : storableText(entry.tool), storableText(entry.text));
    const at = params.length - 4;
    return `($1, $${at}::integer, $${at + 1}::timestamptz, $${at + 2}, $${at + 3}, $${at + 4})`;
  });
  await q.query(`INSERT INTO run_transcript_entries (run_id, seq, at, kind, tool, text) VALUES ${rows.join(', ')} ON CONFLICT (run_id, seq) DO NOTHING`, params);
  const held = await q.query<{ stored_through: number | null }>('SELECT max(seq) AS stored_through FROM run_transcript_entries WHERE run_id = $1', [push.run_id]);
  return { run_id: push.run_id, stored_through: Number(held.rows[0]?.stored_through ?? 0) };
}

/** Up to `limit` entries of the run after seq `after`, in order. 404 for an unknown run. */
export async function readTranscript(q: Queryable, runId: string, after: number, limit: number): Promise<TranscriptPage> {
  const run = await runStateOf(q, runId);
  const result = await q.query<EntryRow>(
    'SELECT seq, at, kind, tool, text FROM run_transcript_entries WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
    [runId, after, limit + 1],
  );
  const entries = result.rows.slice(0, limit).map(toEntry);
  return { run_id: runId, run_state: run.state, run_updated_at: new Date(run.updated_at).toISOString(), entries, next_after: entries.at(-1)?.seq ?? after, has_more: result.rows.length > limit };
}
