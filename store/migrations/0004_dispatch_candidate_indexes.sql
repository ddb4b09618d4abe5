-- The first eligible item of a lane, whichever routing rule sends it there (store/dispatch-candidates.ts).
-- IF NOT EXISTS: a database migrated by an interim edit of 0003 already has both indexes.
CREATE INDEX IF NOT EXISTS queue_items_eligible_by_target
  ON queue_items (machine_target, dispatch_priority, selection_rank, updated_at, project_id)
  WHERE status = 'queued' AND NOT manual_review_required;
CREATE INDEX IF NOT EXISTS queue_items_eligible_by_class
  ON queue_items (workload_class, dispatch_priority, selection_rank, updated_at, project_id)
  WHERE status = 'queued' AND NOT manual_review_required AND machine_target IS NULL;
