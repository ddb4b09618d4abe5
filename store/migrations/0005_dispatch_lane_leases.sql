-- A lane a dispatch-next call is about to dispatch to, held from picking its candidate until the run workflow has
-- answered (store/lane-leases.ts). Parallel callers skip leased lanes instead of racing for one candidate.
-- A lease left by a crashed process lapses at expires_at.
CREATE TABLE dispatch_lane_leases (
  lane text PRIMARY KEY,
  holder text NOT NULL,
  expires_at timestamptz NOT NULL
);
