-- Wrong sign-ins per client in fixed windows (README "Security model"), in the database rather than in a process's
-- memory, so every control-plane replica spends from one budget and the limit holds for the cluster.
CREATE TABLE sign_in_failures (
  client_key text PRIMARY KEY CHECK (length(client_key) BETWEEN 1 AND 100),
  window_started_at timestamptz NOT NULL,
  failures integer NOT NULL CHECK (failures >= 1)
);

CREATE INDEX sign_in_failures_window ON sign_in_failures (window_started_at);
