-- A run's prompt states its project's research contract, and its token budget follows the candidate's expected budget
-- (docs/runs.md#research-contract). Promotion copies both onto the project, so a dispatch reads the projects ledger
-- alone; projects promoted before this migration get theirs from their candidate here.
ALTER TABLE projects
  ADD COLUMN research_contract jsonb CONSTRAINT projects_research_contract_object
    CHECK (research_contract IS NULL OR jsonb_typeof(research_contract) = 'object'),
  ADD COLUMN expected_token_budget integer CONSTRAINT projects_expected_token_budget_positive
    CHECK (expected_token_budget > 0);

UPDATE projects AS p
SET research_contract = jsonb_build_object(
      'title', c.title,
      'hypothesis', c.hypothesis,
      'mechanism', c.mechanism,
      'baseline_to_beat', c.baseline_to_beat,
      'success_threshold', c.success_threshold,
      'kill_condition', c.kill_condition,
      'expected_artifacts', c.expected_artifacts,
      'required_evidence', c.required_evidence),
    expected_token_budget = c.expected_token_budget
FROM research_candidates AS c
WHERE c.candidate_id = p.candidate_id;
