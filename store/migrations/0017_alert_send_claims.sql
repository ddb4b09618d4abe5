-- A queue finding is sent by one check at a time and at most once per cooldown, also when checks run at the same
-- moment on one replica or several (README "Queue alerts"): a check claims each finding it is about to send here, and a
-- claim holds for the cooldown unless every channel failed, when the check gives it back.
CREATE TABLE alert_send_claims (
  finding_key text PRIMARY KEY,
  holder text NOT NULL,
  claimed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
