-- Core (README "Core"): every snapshot a workflow tool posts to /svc-core/snapshots/workflow-queue in a recording
-- mode (shadow, compare, enforce), as sent, with what compare warned about and what enforce applied or skipped.
CREATE TABLE core_snapshots (
  snapshot_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  idempotency_key text NOT NULL UNIQUE CHECK (length(idempotency_key) BETWEEN 1 AND 200),
  source text NOT NULL CHECK (length(source) BETWEEN 1 AND 200),
  mode text NOT NULL CONSTRAINT core_snapshots_mode_check CHECK (mode IN ('shadow', 'compare', 'enforce')),
  captured_at timestamptz NOT NULL,
  queue_rows jsonb NOT NULL CHECK (jsonb_typeof(queue_rows) = 'array'),
  paper_rows jsonb NOT NULL CHECK (jsonb_typeof(paper_rows) = 'array'),
  queue_row_count integer NOT NULL CHECK (queue_row_count >= 0),
  paper_row_count integer NOT NULL CHECK (paper_row_count >= 0),
  warnings jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(warnings) = 'array'),
  -- enforce: the rows written, and how many snapshot rows were skipped for each reason.
  applied jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(applied) = 'array'),
  skipped jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(skipped) = 'object'),
  event_id bigint NOT NULL REFERENCES audit_events (id),
  recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX core_snapshots_source ON core_snapshots (source, snapshot_id DESC);
