-- The control-plane replicas sharing this database (README "Running on several machines"): each one's config
-- fingerprint and per-field digests (never a config value), refreshed while it runs, so a replica whose config
-- differs from the others' is seen on /control/health, in an alert and at start.
CREATE TABLE control_plane_replicas (
  replica_id text PRIMARY KEY CHECK (length(replica_id) BETWEEN 1 AND 200),
  config_fingerprint text NOT NULL CHECK (config_fingerprint ~ '^[0-9a-f]{16}$'),
  config_fields jsonb NOT NULL CHECK (jsonb_typeof(config_fields) = 'object'),
  started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_seen_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
