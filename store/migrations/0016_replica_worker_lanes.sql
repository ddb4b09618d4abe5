-- The worker target names (lanes) each control-plane replica has configured, so a dispatch goes only to a lane that
-- every live replica knows: any replica's worker may run the run's activities (README "Running on several machines").
-- NULL: not reported.
ALTER TABLE control_plane_replicas ADD COLUMN worker_lanes text[];
