-- draft-next without a scan (README "Papers", "Drafting"): a run carries a copy of its paper's paper_status, so the
-- runs still waiting for a first draft (no paper, or one still `eligible`) are one partial index, however many
-- completed runs already have drafts.

-- NULL while the run has no paper. Written only by the trigger below, never by the service.
ALTER TABLE runs ADD COLUMN paper_status text;

-- The copy is bookkeeping, not a change to the run: it leaves the run's updated_at alone. (The trigger function
-- writes only a copy that differs, so an update that writes the same status does not touch the run either.)
DROP TRIGGER runs_touch ON runs;
CREATE TRIGGER runs_touch
  BEFORE UPDATE ON runs
  FOR EACH ROW WHEN (OLD.paper_status IS NOT DISTINCT FROM NEW.paper_status)
  EXECUTE FUNCTION touch_updated_at();

CREATE FUNCTION copy_paper_status_to_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    UPDATE runs SET paper_status = NULL WHERE run_id = OLD.run_id AND paper_status IS NOT NULL;
  ELSE
    UPDATE runs SET paper_status = NEW.paper_status WHERE run_id = NEW.run_id AND paper_status IS DISTINCT FROM NEW.paper_status;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER papers_copy_status_to_run
  AFTER INSERT OR DELETE OR UPDATE OF paper_status ON papers
  FOR EACH ROW EXECUTE FUNCTION copy_paper_status_to_run();

UPDATE runs r SET paper_status = p.paper_status FROM papers p WHERE p.run_id = r.run_id;

-- Completed runs with a positive decision and enough evidence whose paper is not drafted yet, first finished first.
CREATE INDEX runs_awaiting_draft ON runs (finished_at, run_id)
  WHERE state = 'reconciled' AND decision = 'finalize_positive'
    AND evidence -> 'sufficient_for_paper' = 'true'::jsonb
    AND (paper_status IS NULL OR paper_status = 'eligible');

-- Replaced by runs_awaiting_draft: it still listed every drafted run.
DROP INDEX runs_paper_candidates;
