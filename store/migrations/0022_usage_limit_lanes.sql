-- A run waiting out a long usage limit lets its lane go (docs/runs.md#waiting-out-a-usage-limit): its queue item is
-- usage_limited meanwhile, a status outside the one-active-row-per-lane index, and takes a lane back when it resumes.
ALTER TABLE queue_items DROP CONSTRAINT queue_items_status_check;
ALTER TABLE queue_items ADD CONSTRAINT queue_items_status_check CHECK (status IN (
  'queued', 'dispatching', 'running', 'awaiting_wake', 'wake_received', 'reconciling', 'completed', 'paused',
  'canceled', 'dispatch_error', 'blocked', 'needs_review', 'usage_limited'));
