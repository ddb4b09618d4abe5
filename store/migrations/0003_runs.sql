-- Runs, lanes, worker callbacks and worker observations (issue 5: queue, dispatch and runs).

-- The lane (resolved worker target) an item was claimed on. At most one in-flight row per lane: the database, not the
-- caller, decides which of two racing claims wins.
ALTER TABLE queue_items ADD COLUMN lane text;
-- Consecutive failed dispatch attempts; the third in a row moves the item to dispatch_error (decisions §3).
ALTER TABLE queue_items ADD COLUMN dispatch_failures integer NOT NULL DEFAULT 0 CHECK (dispatch_failures >= 0);
ALTER TABLE queue_items ADD CONSTRAINT queue_items_active_has_lane CHECK (
  status NOT IN ('dispatching', 'running', 'awaiting_wake', 'wake_received', 'reconciling') OR lane IS NOT NULL);

CREATE UNIQUE INDEX queue_items_one_active_per_lane ON queue_items (lane)
  WHERE status IN ('dispatching', 'running', 'awaiting_wake', 'wake_received', 'reconciling');

CREATE TABLE runs (
  run_id text PRIMARY KEY CHECK (run_id ~ '^[a-z0-9][a-z0-9._-]{0,127}-[0-9]{8}T[0-9]{6}Z$'),
  project_id text NOT NULL REFERENCES projects (project_id),
  workflow_id text NOT NULL UNIQUE,
  state text NOT NULL CONSTRAINT runs_state_check CHECK (state IN (
    'prepared', 'dispatching', 'awaiting_wake', 'running', 'question_pending', 'wake_ready', 'session_finished_ready',
    'gate_timeout', 'gate_error', 'reconciled', 'dispatch_error', 'canceled')),
  lane text NOT NULL,
  wake_gate_url text NOT NULL,
  workload_class text NOT NULL,
  requested_by text NOT NULL,
  session_id text,
  question text,
  decision text,
  decision_summary text,
  evidence jsonb,
  prepare_result jsonb,
  dispatch_result jsonb,
  last_error text,
  finished_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX runs_project ON runs (project_id, created_at DESC);
CREATE INDEX runs_state ON runs (state, updated_at DESC);

CREATE TRIGGER runs_touch
  BEFORE UPDATE ON runs
  FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

-- One row per applied run transition: the business key that makes a retried transition activity a no-op.
CREATE TABLE run_transitions (
  run_id text NOT NULL REFERENCES runs (run_id),
  transition text NOT NULL CHECK (transition ~ '^[a-z][a-z_]{0,63}$'),
  from_state text,
  to_state text NOT NULL,
  queue_status text,
  audit_event_id bigint,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (run_id, transition)
);

-- Every completion callback the gate delivered, stored by its idempotency key before anything acts on it.
CREATE TABLE worker_callbacks (
  idempotency_key text PRIMARY KEY CHECK (length(idempotency_key) BETWEEN 1 AND 512),
  -- Hash of the body without seen_at / delivered_at, which change on every redelivery.
  payload_hash text NOT NULL,
  run_id text NOT NULL,
  project_id text NOT NULL,
  event_type text NOT NULL,
  payload jsonb NOT NULL,
  ignored boolean NOT NULL,
  ignore_reason text,
  response jsonb NOT NULL,
  signaled_at timestamptz,
  received_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX worker_callbacks_received ON worker_callbacks (received_at DESC);
CREATE INDEX worker_callbacks_run ON worker_callbacks (run_id, received_at);

-- Cached worker preflight results (interface.md "Worker observation").
CREATE TABLE worker_observations (
  observation_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  target text NOT NULL,
  wake_gate_url text NOT NULL,
  ok boolean NOT NULL,
  summary text NOT NULL,
  checks jsonb NOT NULL,
  -- The run whose dispatch ran this preflight, if any.
  run_id text,
  observed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX worker_observations_target ON worker_observations (target, observation_id DESC);
CREATE INDEX worker_observations_run ON worker_observations (run_id) WHERE run_id IS NOT NULL;
