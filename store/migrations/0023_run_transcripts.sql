-- A run's transcript (docs/runs.md#following-a-run-live): what its agent said and did, as its worker gate saw it and
-- pushed it, numbered from 1 within the run. A gate delivers at least once: an entry already held is not written again.
-- A run keeps at most 5,001 entries (the gate's last says the transcript was cut), each text at most 4,100 characters.
CREATE TABLE run_transcript_entries (
  run_id text NOT NULL REFERENCES runs (run_id),
  seq integer NOT NULL CONSTRAINT run_transcript_entries_seq_range CHECK (seq BETWEEN 1 AND 5001),
  at timestamptz NOT NULL,
  kind text NOT NULL CONSTRAINT run_transcript_entries_kind_check CHECK (kind IN ('message', 'tool_call', 'tool_output', 'usage', 'lifecycle')),
  tool text CONSTRAINT run_transcript_entries_tool_size CHECK (length(tool) <= 200),
  text text NOT NULL CONSTRAINT run_transcript_entries_text_size CHECK (length(text) <= 4100),
  received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (run_id, seq)
);
