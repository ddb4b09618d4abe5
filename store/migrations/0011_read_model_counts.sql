-- Counts kept as rows change (README "Read models"), so the overview, the status snapshot and the lanes read a
-- handful of counter rows instead of grouping whole ledgers on every call. Each counter table is written only by
-- the triggers below, in the same transaction as the change it counts.

-- Queue items by the columns the lane rules read (domain/operator-lanes.ts) and the lane they were claimed on.
CREATE TABLE queue_item_counts (
  status text NOT NULL,
  manual_review_required boolean NOT NULL,
  lane text NOT NULL DEFAULT '',
  n bigint NOT NULL CHECK (n >= 0),
  PRIMARY KEY (status, manual_review_required, lane)
);

CREATE FUNCTION count_queue_item() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE queue_item_counts SET n = n - 1
     WHERE status = OLD.status AND manual_review_required = OLD.manual_review_required AND lane = coalesce(OLD.lane, '');
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO queue_item_counts (status, manual_review_required, lane, n)
    VALUES (NEW.status, NEW.manual_review_required, coalesce(NEW.lane, ''), 1)
    ON CONFLICT (status, manual_review_required, lane) DO UPDATE SET n = queue_item_counts.n + 1;
  END IF;
  RETURN NULL;
END
$$;

INSERT INTO queue_item_counts (status, manual_review_required, lane, n)
SELECT status, manual_review_required, coalesce(lane, ''), count(*) FROM queue_items GROUP BY 1, 2, 3;

CREATE TRIGGER queue_items_count
  AFTER INSERT OR DELETE OR UPDATE OF status, manual_review_required, lane ON queue_items
  FOR EACH ROW EXECUTE FUNCTION count_queue_item();

-- Runs by state.
CREATE TABLE run_state_counts (
  state text PRIMARY KEY,
  n bigint NOT NULL CHECK (n >= 0)
);

-- The paper-pipeline count a completed run falls in (domain/paper-candidacy.ts paperPipelineCount, whose constants
-- it repeats: the completed state `reconciled`, the writable decision `finalize_positive`); NULL for none. A test
-- holds it to the domain rule on generated runs and papers.
CREATE FUNCTION paper_pipeline_count(
  run_state text, decision text, evidence jsonb, paper_status text, review_status text, imported boolean
) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN run_state IS DISTINCT FROM 'reconciled' THEN NULL
    WHEN imported THEN 'published_imported'
    WHEN review_status = 'finalized' THEN 'publish_ready'
    WHEN coalesce(jsonb_typeof(evidence -> 'sufficient_for_paper') = 'boolean' AND (evidence ->> 'sufficient_for_paper')::boolean, false)
         AND decision IS NOT DISTINCT FROM 'finalize_positive'
      THEN CASE WHEN paper_status IS NULL OR paper_status = 'eligible' THEN 'write_needed' END
    WHEN paper_status IS NOT NULL THEN NULL
    WHEN NOT coalesce(jsonb_typeof(evidence -> 'sufficient_for_paper') = 'boolean' AND (evidence ->> 'sufficient_for_paper')::boolean, false)
      THEN 'raw_completed_no_paper_candidates'
    ELSE 'not_writable_by_decision_gate'
  END
$$;

CREATE TABLE paper_pipeline_counts (
  name text PRIMARY KEY CONSTRAINT paper_pipeline_counts_name_check CHECK (name IN (
    'write_needed', 'raw_completed_no_paper_candidates', 'not_writable_by_decision_gate', 'publish_ready',
    'published_imported')),
  n bigint NOT NULL CHECK (n >= 0)
);
INSERT INTO paper_pipeline_counts (name, n)
VALUES ('write_needed', 0), ('raw_completed_no_paper_candidates', 0), ('not_writable_by_decision_gate', 0),
       ('publish_ready', 0), ('published_imported', 0);

-- A run's copies of its paper's review status and whether the paper was imported, beside its copy of paper_status
-- (migration 0008): everything the pipeline count of a run reads is then on the run's own row.
ALTER TABLE runs ADD COLUMN paper_review_status text;
ALTER TABLE runs ADD COLUMN paper_imported boolean NOT NULL DEFAULT false;

DROP TRIGGER runs_touch ON runs;
CREATE TRIGGER runs_touch
  BEFORE UPDATE ON runs
  FOR EACH ROW WHEN (OLD.paper_status IS NOT DISTINCT FROM NEW.paper_status
                     AND OLD.paper_review_status IS NOT DISTINCT FROM NEW.paper_review_status
                     AND OLD.paper_imported IS NOT DISTINCT FROM NEW.paper_imported)
  EXECUTE FUNCTION touch_updated_at();

CREATE OR REPLACE FUNCTION copy_paper_status_to_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    UPDATE runs SET paper_status = NULL, paper_review_status = NULL
     WHERE run_id = OLD.run_id AND (paper_status IS NOT NULL OR paper_review_status IS NOT NULL);
  ELSE
    UPDATE runs SET paper_status = NEW.paper_status, paper_review_status = NEW.review_status
     WHERE run_id = NEW.run_id
       AND (paper_status IS DISTINCT FROM NEW.paper_status OR paper_review_status IS DISTINCT FROM NEW.review_status);
  END IF;
  RETURN NULL;
END
$$;

DROP TRIGGER papers_copy_status_to_run ON papers;
CREATE TRIGGER papers_copy_status_to_run
  AFTER INSERT OR DELETE OR UPDATE OF paper_status, review_status ON papers
  FOR EACH ROW EXECUTE FUNCTION copy_paper_status_to_run();

CREATE FUNCTION copy_import_to_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE runs r SET paper_imported = (TG_OP = 'INSERT')
    FROM papers p
   WHERE p.paper_id = CASE WHEN TG_OP = 'INSERT' THEN NEW.paper_id ELSE OLD.paper_id END AND r.run_id = p.run_id;
  RETURN NULL;
END
$$;

CREATE TRIGGER corpus_imports_copy_to_run
  AFTER INSERT OR DELETE ON corpus_imports
  FOR EACH ROW EXECUTE FUNCTION copy_import_to_run();

UPDATE runs r SET paper_review_status = p.review_status FROM papers p WHERE p.run_id = r.run_id;
UPDATE runs r SET paper_imported = true FROM papers p JOIN corpus_imports ci ON ci.paper_id = p.paper_id WHERE p.run_id = r.run_id;

INSERT INTO run_state_counts (state, n) SELECT state, count(*) FROM runs GROUP BY state;
UPDATE paper_pipeline_counts c SET n = counted.n
  FROM (SELECT paper_pipeline_count(state, decision, evidence, paper_status, paper_review_status, paper_imported) AS name,
               count(*) AS n
          FROM runs GROUP BY 1) AS counted
 WHERE counted.name = c.name;

CREATE FUNCTION count_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  old_count text;
  new_count text;
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    old_count := paper_pipeline_count(OLD.state, OLD.decision, OLD.evidence, OLD.paper_status, OLD.paper_review_status, OLD.paper_imported);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    new_count := paper_pipeline_count(NEW.state, NEW.decision, NEW.evidence, NEW.paper_status, NEW.paper_review_status, NEW.paper_imported);
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') AND (TG_OP = 'DELETE' OR OLD.state IS DISTINCT FROM NEW.state) THEN
    UPDATE run_state_counts SET n = n - 1 WHERE state = OLD.state;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND (TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM NEW.state) THEN
    INSERT INTO run_state_counts (state, n) VALUES (NEW.state, 1)
    ON CONFLICT (state) DO UPDATE SET n = run_state_counts.n + 1;
  END IF;
  IF old_count IS DISTINCT FROM new_count THEN
    IF old_count IS NOT NULL THEN UPDATE paper_pipeline_counts SET n = n - 1 WHERE name = old_count; END IF;
    IF new_count IS NOT NULL THEN UPDATE paper_pipeline_counts SET n = n + 1 WHERE name = new_count; END IF;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER runs_count
  AFTER INSERT OR DELETE OR UPDATE ON runs
  FOR EACH ROW EXECUTE FUNCTION count_run();

-- The overview's attention list: each attention status, and flagged items, the longest waiting first.
CREATE INDEX queue_items_status_waiting ON queue_items (status, updated_at, project_id);
CREATE INDEX queue_items_flagged_waiting ON queue_items (updated_at, project_id) WHERE manual_review_required;
