-- Foundation: audit log, idempotency keys, operator flags, dashboard sessions.

CREATE TABLE audit_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  entity_type text NOT NULL CHECK (entity_type ~ '^[a-z][a-z0-9_]*$'),
  entity_id text NOT NULL CHECK (length(entity_id) BETWEEN 1 AND 512),
  event_type text NOT NULL CHECK (event_type ~ '^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$'),
  payload jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(payload) = 'object'),
  idempotency_key text,
  actor text,
  request_id text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Replaying a command or a retried activity with the same key appends nothing new.
CREATE UNIQUE INDEX audit_events_idempotency_key ON audit_events (event_type, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX audit_events_entity_type ON audit_events (entity_type, id DESC);
CREATE INDEX audit_events_entity_id ON audit_events (entity_id, id DESC);
CREATE INDEX audit_events_event_type ON audit_events (event_type, id DESC);

CREATE FUNCTION reject_audit_event_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_events is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER audit_events_append_only
  BEFORE UPDATE OR DELETE ON audit_events
  FOR EACH ROW EXECUTE FUNCTION reject_audit_event_change();

CREATE TRIGGER audit_events_no_truncate
  BEFORE TRUNCATE ON audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION reject_audit_event_change();

-- Exact, O(1) total for the unfiltered event list: counting 100k+ rows per page view is too slow. Appends add to
-- one of several shards (picked by backend pid) so concurrent transactions rarely wait on the same counter row.
CREATE TABLE audit_event_totals (
  shard smallint PRIMARY KEY,
  events bigint NOT NULL DEFAULT 0
);
INSERT INTO audit_event_totals (shard) SELECT generate_series(0, 15);

CREATE FUNCTION count_audit_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE audit_event_totals SET events = events + (SELECT count(*) FROM appended)
  WHERE shard = pg_backend_pid() % 16;
  RETURN NULL;
END
$$;

CREATE TRIGGER audit_events_count
  AFTER INSERT ON audit_events
  REFERENCING NEW TABLE AS appended
  FOR EACH STATEMENT EXECUTE FUNCTION count_audit_events();

CREATE TABLE idempotency_keys (
  scope text NOT NULL,
  key text NOT NULL CHECK (length(key) BETWEEN 1 AND 256),
  payload_hash text NOT NULL,
  response jsonb,
  status_code integer,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  completed_at timestamptz,
  PRIMARY KEY (scope, key)
);

CREATE TABLE flags (
  name text PRIMARY KEY,
  value jsonb NOT NULL,
  updated_by text,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

INSERT INTO flags (name, value) VALUES
  ('queue_paused', 'false'::jsonb),
  ('maintenance_mode', 'false'::jsonb);

CREATE TABLE sessions (
  id_hash text PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_seen_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at timestamptz NOT NULL
);

CREATE INDEX sessions_expires_at ON sessions (expires_at);
