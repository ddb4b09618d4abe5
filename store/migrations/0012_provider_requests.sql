-- Every request the control plane sent to the research provider (README "Provider-backed generation"): when, for which
-- batch, how it ended, and the tokens and cost the provider reported. The budget counts requests of the last 24 hours
-- from here. Append-only, like the audit log.
CREATE TABLE provider_requests (
  request_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  purpose text NOT NULL CHECK (length(purpose) BETWEEN 1 AND 100),
  batch_id text NOT NULL CHECK (length(batch_id) BETWEEN 1 AND 200),
  model text NOT NULL,
  outcome text NOT NULL CHECK (outcome IN ('ok', 'rate_limited', 'timeout', 'server_error', 'http_error', 'malformed_output', 'unreachable')),
  http_status integer CHECK (http_status BETWEEN 100 AND 599),
  duration_ms integer NOT NULL CHECK (duration_ms >= 0),
  prompt_tokens integer CHECK (prompt_tokens >= 0),
  completion_tokens integer CHECK (completion_tokens >= 0),
  total_tokens integer CHECK (total_tokens >= 0),
  cost numeric CHECK (cost >= 0),
  detail text NOT NULL,
  requested_by text NOT NULL,
  requested_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX provider_requests_requested_at ON provider_requests (requested_at DESC);

CREATE FUNCTION reject_provider_request_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'provider_requests is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER provider_requests_append_only
  BEFORE UPDATE OR DELETE ON provider_requests
  FOR EACH ROW EXECUTE FUNCTION reject_provider_request_change();

CREATE TRIGGER provider_requests_no_truncate
  BEFORE TRUNCATE ON provider_requests
  FOR EACH STATEMENT EXECUTE FUNCTION reject_provider_request_change();
