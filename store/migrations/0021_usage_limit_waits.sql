-- Waiting out a usage limit (docs/runs.md#waiting-out-a-usage-limit). A run whose model refused for a rate or usage
-- limit is usage_limited until its session resumes; it keeps when the limit resets (as the tool said), when the run
-- resumes by itself, and the tool's words, while it waits.
ALTER TABLE runs DROP CONSTRAINT runs_state_check;
ALTER TABLE runs ADD CONSTRAINT runs_state_check CHECK (state IN (
  'prepared', 'dispatching', 'awaiting_wake', 'running', 'question_pending', 'usage_limited', 'wake_ready',
  'session_finished_ready', 'gate_timeout', 'gate_error', 'reconciled', 'dispatch_error', 'canceled'));

ALTER TABLE runs ADD COLUMN usage_limit jsonb;
