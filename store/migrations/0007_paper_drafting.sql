-- Drafting papers (README "Papers"): how often a draft was rewritten, and an index for draft-next's candidates.

-- Rewrites of the paper's draft (rewrite-draft and rewrite-batch); `skip_rewritten` leaves out papers above 0.
ALTER TABLE papers ADD COLUMN rewrite_count integer NOT NULL DEFAULT 0 CHECK (rewrite_count >= 0);
ALTER TABLE papers ADD COLUMN rewritten_at timestamptz;

-- draft-next walks completed runs with a positive decision, the one that finished first first.
CREATE INDEX runs_paper_candidates ON runs (finished_at, run_id)
  WHERE state = 'reconciled' AND decision = 'finalize_positive';
