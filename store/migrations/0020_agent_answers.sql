-- The operator answers the agent (docs/runs.md#answering-the-agent). A run keeps the question its agent asked with its
-- choices (or the tool call a permission request is for), and every answer given to it, numbered within the run. A
-- run may ask, be answered and resume more than once, so a transition may now happen several times in one run: each
-- occurrence is a row of its own (the first keeps occurrence 1, as every transition recorded before this had).
ALTER TABLE runs ADD COLUMN question_detail jsonb;

ALTER TABLE run_transitions
  ADD COLUMN occurrence integer NOT NULL DEFAULT 1 CONSTRAINT run_transitions_occurrence_range CHECK (occurrence BETWEEN 1 AND 1000);
ALTER TABLE run_transitions DROP CONSTRAINT run_transitions_pkey;
ALTER TABLE run_transitions ADD PRIMARY KEY (run_id, transition, occurrence);

CREATE TABLE run_answers (
  run_id text NOT NULL REFERENCES runs (run_id),
  answer_number integer NOT NULL CONSTRAINT run_answers_number_range CHECK (answer_number BETWEEN 1 AND 1000),
  question text,
  question_detail jsonb,
  answer jsonb NOT NULL,
  prompt text NOT NULL CONSTRAINT run_answers_prompt_size CHECK (length(prompt) BETWEEN 1 AND 65536),
  allowed_tools jsonb NOT NULL DEFAULT '[]'::jsonb,
  requested_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (run_id, answer_number)
);
