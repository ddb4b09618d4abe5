-- Queue alerts (README "Queue alerts"): every check that ran live, with what it found and what it sent, and one row per
-- finding each time a channel took it, which the cooldown reads. Both append-only, like the audit log.
CREATE TABLE alert_checks (
  check_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  trigger text NOT NULL CHECK (trigger IN ('api', 'schedule')),
  force_notify boolean NOT NULL,
  findings jsonb NOT NULL CHECK (jsonb_typeof(findings) = 'array'),
  sent jsonb NOT NULL CHECK (jsonb_typeof(sent) = 'array'),
  suppressed_by_cooldown integer NOT NULL CHECK (suppressed_by_cooldown >= 0),
  checked_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE alert_notices (
  notice_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  finding_key text NOT NULL CHECK (length(finding_key) BETWEEN 1 AND 500),
  check_id bigint NOT NULL REFERENCES alert_checks (check_id),
  notified_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX alert_notices_finding ON alert_notices (finding_key, notified_at DESC);

CREATE FUNCTION reject_alert_ledger_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER alert_checks_append_only BEFORE UPDATE OR DELETE ON alert_checks
  FOR EACH ROW EXECUTE FUNCTION reject_alert_ledger_change();
CREATE TRIGGER alert_checks_no_truncate BEFORE TRUNCATE ON alert_checks
  FOR EACH STATEMENT EXECUTE FUNCTION reject_alert_ledger_change();
CREATE TRIGGER alert_notices_append_only BEFORE UPDATE OR DELETE ON alert_notices
  FOR EACH ROW EXECUTE FUNCTION reject_alert_ledger_change();
CREATE TRIGGER alert_notices_no_truncate BEFORE TRUNCATE ON alert_notices
  FOR EACH STATEMENT EXECUTE FUNCTION reject_alert_ledger_change();
