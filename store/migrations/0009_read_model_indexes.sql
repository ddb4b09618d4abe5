-- The v1 lists (README "Read models") walk by keyset: each sort they offer has an index on exactly its columns, so a
-- page, first or deep, starts with an index seek and reads one page of rows.

CREATE INDEX queue_items_v1_dispatch ON queue_items (dispatch_priority, selection_rank, updated_at, project_id);
CREATE INDEX queue_items_v1_updated ON queue_items (updated_at, project_id);
CREATE INDEX queue_items_v1_created ON queue_items (created_at, project_id);

CREATE INDEX runs_v1_created ON runs (created_at, run_id);
CREATE INDEX runs_v1_updated ON runs (updated_at, run_id);

CREATE INDEX projects_v1_created ON projects (created_at, project_id);

CREATE INDEX papers_v1_rank ON papers (rank_score, paper_id);
CREATE INDEX papers_v1_updated ON papers (updated_at, paper_id);
CREATE INDEX papers_v1_created ON papers (created_at, paper_id);
