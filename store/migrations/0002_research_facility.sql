-- Research Facility ledgers (sources, candidates, admissions, lineage) and the runtime ledgers they promote into
-- (ideas, projects, queue items). Lists are jsonb arrays throughout. The value lists in the CHECK constraints mirror
-- domain/research-candidate.ts, domain/workload.ts, domain/queue-status.ts and LINEAGE_KINDS in
-- store/research-ledgers.ts; test/research-store.test.ts compares them.

-- Keeps updated_at current on every UPDATE unless the statement sets it itself.
CREATE FUNCTION touch_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
    NEW.updated_at := clock_timestamp();
  END IF;
  RETURN NEW;
END
$$;

CREATE TABLE research_sources (
  source_id text PRIMARY KEY CHECK (length(source_id) BETWEEN 1 AND 200),
  kind text NOT NULL CONSTRAINT research_sources_kind_check CHECK (kind IN (
    'paper', 'repository', 'blog', 'social_post', 'prior_result', 'user_batch', 'generated_hypothesis')),
  title text NOT NULL CHECK (length(title) BETWEEN 1 AND 1000),
  url text CHECK (url IS NULL OR length(url) BETWEEN 1 AND 2000),
  summary text,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX research_sources_kind ON research_sources (kind, created_at DESC);
CREATE INDEX research_sources_created_at ON research_sources (created_at DESC);

CREATE TABLE research_candidates (
  candidate_id text PRIMARY KEY CHECK (length(candidate_id) BETWEEN 1 AND 200),
  batch_id text NOT NULL CHECK (length(batch_id) BETWEEN 1 AND 200),
  generation_mode text NOT NULL CONSTRAINT research_candidates_generation_mode_check CHECK (generation_mode IN (
    'fresh_grounded', 'followup_from_negative', 'moonshot', 'implementation_gap', 'paper_replication_extension',
    'home_hardware_accessibility', 'manual_import')),
  title text NOT NULL CHECK (length(title) BETWEEN 1 AND 300),
  hypothesis text,
  mechanism text,
  baseline_to_beat text,
  success_threshold text,
  kill_condition text,
  expected_artifacts jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(expected_artifacts) = 'array'),
  required_evidence jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(required_evidence) = 'array'),
  estimated_runtime_class text CONSTRAINT research_candidates_runtime_class_check CHECK (estimated_runtime_class IN (
    'minutes', 'hours', 'overnight', 'days', 'week_plus')),
  expected_token_budget integer CHECK (expected_token_budget > 0),
  machine_target text,
  workload_class text CONSTRAINT research_candidates_workload_class_check CHECK (workload_class IN (
    'unknown', 'cpu_only', 'gpu_required', 'inference_eval', 'training', 'control_plane', 'agent_harness')),
  likely_failure_modes jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(likely_failure_modes) = 'array'),
  novelty_comparison text,
  dedupe_key text NOT NULL CONSTRAINT research_candidates_dedupe_key_check
    CHECK (dedupe_key ~ '^[a-z0-9][a-z0-9._:/-]{2,199}$'),
  source_ids jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(source_ids) = 'array'),
  source_urls jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(source_urls) = 'array'),
  parent_project_id text CHECK (parent_project_id IS NULL OR length(parent_project_id) >= 1),
  parent_run_id text CHECK (parent_run_id IS NULL OR length(parent_run_id) >= 1),
  similar_prior_projects jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(similar_prior_projects) = 'array'),
  accessibility_delta text,
  novelty numeric NOT NULL CHECK (novelty BETWEEN 0 AND 10),
  feasibility numeric NOT NULL CHECK (feasibility BETWEEN 0 AND 10),
  accessibility numeric CHECK (accessibility BETWEEN 0 AND 10),
  falsifiability numeric CHECK (falsifiability BETWEEN 0 AND 10),
  score numeric NOT NULL CHECK (score BETWEEN 0 AND 100),
  decision text NOT NULL CONSTRAINT research_candidates_decision_check CHECK (decision IN (
    'admitted', 'rejected', 'merged', 'needs-review')),
  merged_into text REFERENCES research_candidates (candidate_id),
  queue_admitted boolean NOT NULL DEFAULT false,
  text_fingerprint text,
  proposal jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(proposal) = 'object'),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- Rule 1: a fresh_grounded candidate needs at least one source reference.
  CONSTRAINT research_candidates_fresh_grounded_needs_source CHECK (
    generation_mode <> 'fresh_grounded' OR jsonb_array_length(source_ids) > 0 OR jsonb_array_length(source_urls) > 0),
  -- Rule 2: a followup_from_negative candidate needs parent project or run lineage.
  CONSTRAINT research_candidates_followup_needs_parent CHECK (
    generation_mode <> 'followup_from_negative' OR parent_project_id IS NOT NULL OR parent_run_id IS NOT NULL),
  CONSTRAINT research_candidates_merged_into_only_when_merged CHECK (
    merged_into IS NULL OR (decision = 'merged' AND merged_into <> candidate_id)),
  -- Only an admitted candidate can have been promoted into the queue.
  CONSTRAINT research_candidates_queue_admitted_only_when_admitted CHECK (NOT queue_admitted OR decision = 'admitted')
);

CREATE INDEX research_candidates_dedupe_key ON research_candidates (dedupe_key);
CREATE INDEX research_candidates_decision ON research_candidates (decision, created_at DESC);
CREATE INDEX research_candidates_generation_mode ON research_candidates (generation_mode, created_at DESC);
CREATE INDEX research_candidates_text_fingerprint ON research_candidates (text_fingerprint)
  WHERE text_fingerprint IS NOT NULL;
CREATE INDEX research_candidates_created_at ON research_candidates (created_at DESC, candidate_id DESC);
CREATE INDEX research_candidates_batch_id ON research_candidates (batch_id);

CREATE TRIGGER research_candidates_touch
  BEFORE UPDATE ON research_candidates
  FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

-- Immutable: why a candidate was admitted, rejected, merged or sent to review. candidate_id is NULL when the
-- candidate never became a row because a data-level check refused it.
CREATE TABLE research_admissions (
  admission_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  candidate_id text REFERENCES research_candidates (candidate_id),
  batch_id text NOT NULL,
  dedupe_key text NOT NULL,
  generation_mode text NOT NULL CONSTRAINT research_admissions_generation_mode_check CHECK (generation_mode IN (
    'fresh_grounded', 'followup_from_negative', 'moonshot', 'implementation_gap', 'paper_replication_extension',
    'home_hardware_accessibility', 'manual_import')),
  title text NOT NULL,
  decision text NOT NULL CONSTRAINT research_admissions_decision_check CHECK (decision IN (
    'admitted', 'rejected', 'merged', 'needs-review')),
  score numeric NOT NULL CHECK (score BETWEEN 0 AND 100),
  reasons jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(reasons) = 'array'),
  hard_failures jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(hard_failures) = 'array'),
  score_breakdown jsonb CHECK (score_breakdown IS NULL OR jsonb_typeof(score_breakdown) = 'object'),
  merged_into text,
  planner_version text NOT NULL,
  candidate_snapshot jsonb NOT NULL CHECK (jsonb_typeof(candidate_snapshot) = 'object'),
  decided_by text NOT NULL,
  decided_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX research_admissions_candidate_id ON research_admissions (candidate_id, admission_id DESC);
CREATE INDEX research_admissions_decision ON research_admissions (decision, admission_id DESC);
CREATE INDEX research_admissions_batch_id ON research_admissions (batch_id);

CREATE FUNCTION reject_research_admission_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'research_admissions is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER research_admissions_append_only
  BEFORE UPDATE OR DELETE ON research_admissions
  FOR EACH ROW EXECUTE FUNCTION reject_research_admission_change();

CREATE TRIGGER research_admissions_no_truncate
  BEFORE TRUNCATE ON research_admissions
  FOR EACH STATEMENT EXECUTE FUNCTION reject_research_admission_change();

-- Links between any two things of the facility. Recording the same link twice is a no-op.
CREATE TABLE research_lineage (
  lineage_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  from_kind text NOT NULL CONSTRAINT research_lineage_from_kind_check CHECK (from_kind IN (
    'source', 'candidate', 'idea', 'project', 'queue_item', 'run', 'decision', 'paper', 'no_paper_outcome',
    'followup_candidate')),
  from_id text NOT NULL CHECK (length(from_id) BETWEEN 1 AND 512),
  to_kind text NOT NULL CONSTRAINT research_lineage_to_kind_check CHECK (to_kind IN (
    'source', 'candidate', 'idea', 'project', 'queue_item', 'run', 'decision', 'paper', 'no_paper_outcome',
    'followup_candidate')),
  to_id text NOT NULL CHECK (length(to_id) BETWEEN 1 AND 512),
  relation text NOT NULL CHECK (relation ~ '^[a-z][a-z0-9_.-]{0,63}$'),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT research_lineage_unique_link UNIQUE (from_kind, from_id, to_kind, to_id, relation)
);

CREATE INDEX research_lineage_to ON research_lineage (to_kind, to_id);

CREATE TABLE ideas (
  idea_id text PRIMARY KEY CHECK (length(idea_id) BETWEEN 1 AND 200),
  candidate_id text UNIQUE REFERENCES research_candidates (candidate_id),
  title text NOT NULL CHECK (length(title) BETWEEN 1 AND 300),
  hypothesis text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE projects (
  project_id text PRIMARY KEY CONSTRAINT projects_project_id_slug CHECK (project_id ~ '^[a-z0-9][a-z0-9._-]{0,127}$'),
  project_name text NOT NULL CHECK (length(project_name) BETWEEN 1 AND 300),
  -- Relative to project_root: not absolute, no ".." segment, no backslash.
  project_dir text NOT NULL CONSTRAINT projects_project_dir_relative CHECK (
    length(project_dir) BETWEEN 1 AND 1000
    AND project_dir !~ '^/'
    AND project_dir !~ '(^|/)[.][.](/|$)'
    AND strpos(project_dir, chr(92)) = 0),
  idea_id text REFERENCES ideas (idea_id),
  candidate_id text REFERENCES research_candidates (candidate_id),
  workload_class text NOT NULL DEFAULT 'unknown' CONSTRAINT projects_workload_class_check CHECK (workload_class IN (
    'unknown', 'cpu_only', 'gpu_required', 'inference_eval', 'training', 'control_plane', 'agent_harness')),
  machine_target text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX projects_candidate_id ON projects (candidate_id) WHERE candidate_id IS NOT NULL;
CREATE INDEX projects_idea_id ON projects (idea_id) WHERE idea_id IS NOT NULL;

CREATE TRIGGER projects_touch
  BEFORE UPDATE ON projects
  FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

-- One queue row per project.
CREATE TABLE queue_items (
  project_id text PRIMARY KEY REFERENCES projects (project_id),
  project_name text NOT NULL,
  status text NOT NULL DEFAULT 'queued' CONSTRAINT queue_items_status_check CHECK (status IN (
    'queued', 'dispatching', 'running', 'awaiting_wake', 'wake_received', 'reconciling', 'completed', 'paused',
    'canceled', 'dispatch_error', 'blocked', 'needs_review')),
  manual_review_required boolean NOT NULL DEFAULT false,
  dispatch_priority integer NOT NULL DEFAULT 50,
  selection_rank integer NOT NULL DEFAULT 50,
  machine_target text,
  workload_class text NOT NULL DEFAULT 'unknown' CONSTRAINT queue_items_workload_class_check CHECK (workload_class IN (
    'unknown', 'cpu_only', 'gpu_required', 'inference_eval', 'training', 'control_plane', 'agent_harness')),
  current_run_id text,
  last_run_state text,
  next_action_hint text,
  last_error text,
  candidate_id text REFERENCES research_candidates (candidate_id),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX queue_items_dispatch_order
  ON queue_items (status, dispatch_priority, selection_rank, updated_at, project_id);
CREATE INDEX queue_items_candidate_id ON queue_items (candidate_id) WHERE candidate_id IS NOT NULL;

CREATE TRIGGER queue_items_touch
  BEFORE UPDATE ON queue_items
  FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
