-- The paper pipeline's ledgers (README "Papers"): one paper per completed run, its review history, its checklist, the
-- finalization packages prepared for it and the corpus import that publishes it. The value lists in the CHECK
-- constraints mirror domain/paper-status.ts; a test keeps them equal.

CREATE TABLE papers (
  paper_id text PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (project_id),
  run_id text NOT NULL UNIQUE REFERENCES runs (run_id),
  paper_status text NOT NULL CONSTRAINT papers_paper_status_check CHECK (paper_status IN (
    'eligible', 'draft_generating', 'draft_review', 'publication_generating', 'publication_draft',
    'human_review_required', 'archived')),
  review_status text NOT NULL DEFAULT 'unreviewed' CONSTRAINT papers_review_status_check CHECK (review_status IN (
    'unreviewed', 'triage_ready', 'in_review', 'changes_requested', 'blocked', 'approved_for_finalization',
    'finalized', 'rejected')),
  rank_score integer NOT NULL DEFAULT 0,
  -- Human-readable reasons for rank_score, in the order they were added up.
  rank_reasons jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(rank_reasons) = 'array'),
  title text CHECK (title IS NULL OR length(title) BETWEEN 1 AND 1000),
  -- The writer that produced the current draft, and why the hosted one was not used when it fell back.
  writer text CONSTRAINT papers_writer_check CHECK (writer IN ('deterministic', 'hosted')),
  writer_fallback_reason text,
  -- Relative to the control plane's state_dir; artifacts: [{path, sha256, bytes}] of the current draft.
  draft_dir text,
  draft_artifacts jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(draft_artifacts) = 'array'),
  -- What the draft was written from: the evidence files found and the decision.
  evidence_summary jsonb,
  draft_count integer NOT NULL DEFAULT 0 CHECK (draft_count >= 0),
  drafted_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT papers_paper_id_format CHECK (paper_id = project_id || ':' || run_id || ':draft')
);

CREATE INDEX papers_rank ON papers (rank_score DESC, paper_id);
CREATE INDEX papers_updated ON papers (updated_at DESC, paper_id);
CREATE INDEX papers_project ON papers (project_id, created_at DESC);
CREATE INDEX papers_statuses ON papers (paper_status, review_status);

CREATE TRIGGER papers_touch
  BEFORE UPDATE ON papers
  FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

-- Every review_status move, with who made it and why.
CREATE TABLE paper_review_history (
  history_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  paper_id text NOT NULL REFERENCES papers (paper_id),
  from_status text CONSTRAINT paper_review_history_from_status_check CHECK (from_status IN (
    'unreviewed', 'triage_ready', 'in_review', 'changes_requested', 'blocked', 'approved_for_finalization',
    'finalized', 'rejected')),
  to_status text NOT NULL CONSTRAINT paper_review_history_to_status_check CHECK (to_status IN (
    'unreviewed', 'triage_ready', 'in_review', 'changes_requested', 'blocked', 'approved_for_finalization',
    'finalized', 'rejected')),
  note text CHECK (note IS NULL OR length(note) <= 10000),
  blocker text CHECK (blocker IS NULL OR length(blocker) <= 10000),
  requested_by text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX paper_review_history_paper ON paper_review_history (paper_id, history_id);

-- The nine checklist items of every paper; judged_by is 'automated' or the person who set the status.
CREATE TABLE paper_checklist_items (
  paper_id text NOT NULL REFERENCES papers (paper_id),
  item_id text NOT NULL CONSTRAINT paper_checklist_items_item_id_check CHECK (item_id IN (
    'artifact_readability', 'title_abstract_quality', 'claim_evidence_alignment', 'novelty_significance',
    'reproducibility', 'limitations_ethics', 'formatting_quality', 'target_venue_fit', 'final_human_approval')),
  status text NOT NULL DEFAULT 'pending' CONSTRAINT paper_checklist_items_status_check CHECK (status IN (
    'pending', 'pass', 'fail', 'accepted_risk', 'not_applicable')),
  note text CHECK (note IS NULL OR length(note) <= 10000),
  judged_by text,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (paper_id, item_id),
  CONSTRAINT paper_checklist_items_note_required CHECK (
    status NOT IN ('fail', 'accepted_risk') OR (note IS NOT NULL AND length(btrim(note)) > 0))
);

CREATE TRIGGER paper_checklist_items_touch
  BEFORE UPDATE ON paper_checklist_items
  FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

-- A finalization package written for a paper: its directory (relative to state_dir) and the manifest of its files.
CREATE TABLE paper_finalization_packages (
  package_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  paper_id text NOT NULL REFERENCES papers (paper_id),
  target_label text NOT NULL CHECK (length(target_label) BETWEEN 1 AND 200),
  package_dir text NOT NULL,
  manifest jsonb NOT NULL,
  manifest_sha256 text NOT NULL CHECK (manifest_sha256 ~ '^[0-9a-f]{64}$'),
  requested_by text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (paper_id, manifest_sha256)
);

-- A paper is published once it is imported into a corpus: at most one import per paper.
CREATE TABLE corpus_imports (
  paper_id text PRIMARY KEY REFERENCES papers (paper_id),
  corpus_repo text NOT NULL CHECK (length(corpus_repo) BETWEEN 1 AND 500),
  commit_sha text NOT NULL CHECK (commit_sha ~ '^[0-9a-f]{7,64}$'),
  manifest_sha256 text NOT NULL CHECK (manifest_sha256 ~ '^[0-9a-f]{64}$'),
  requested_by text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The paper counts read every completed run.
CREATE INDEX runs_completed ON runs (run_id) WHERE state = 'reconciled';
