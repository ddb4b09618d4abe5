-- Several runs on one worker (docs/runs.md#slots-and-gpus). What a run needs (GPUs, GPU memory on each, CPUs) is
-- stated on its candidate and carried on its queue item; null takes the workload class's default. A run records the
-- GPUs and CPUs it was placed on. gpu_placements holds one row per GPU a run was placed on, so the primary key refuses
-- a second run on a GPU whoever claims it; a row counts only while its run's queue item is active.
ALTER TABLE research_candidates
  ADD COLUMN gpu_count integer CONSTRAINT research_candidates_gpu_count_range CHECK (gpu_count BETWEEN 0 AND 64),
  ADD COLUMN gpu_memory_mib integer CONSTRAINT research_candidates_gpu_memory_mib_range CHECK (gpu_memory_mib BETWEEN 0 AND 16777216),
  ADD COLUMN cpu_count integer CONSTRAINT research_candidates_cpu_count_range CHECK (cpu_count BETWEEN 1 AND 4096);

ALTER TABLE queue_items
  ADD COLUMN gpu_count integer CONSTRAINT queue_items_gpu_count_range CHECK (gpu_count BETWEEN 0 AND 64),
  ADD COLUMN gpu_memory_mib integer CONSTRAINT queue_items_gpu_memory_mib_range CHECK (gpu_memory_mib BETWEEN 0 AND 16777216),
  ADD COLUMN cpu_count integer CONSTRAINT queue_items_cpu_count_range CHECK (cpu_count BETWEEN 1 AND 4096);

ALTER TABLE runs
  ADD COLUMN gpu_indices integer[],
  ADD COLUMN cpu_count integer CONSTRAINT runs_cpu_count_range CHECK (cpu_count BETWEEN 1 AND 4096);

CREATE TABLE gpu_placements (
  target text NOT NULL,
  gpu_index integer NOT NULL CONSTRAINT gpu_placements_gpu_index_range CHECK (gpu_index BETWEEN 0 AND 255),
  run_id text NOT NULL REFERENCES runs (run_id),
  placed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (target, gpu_index)
);
CREATE INDEX gpu_placements_run ON gpu_placements (run_id);
