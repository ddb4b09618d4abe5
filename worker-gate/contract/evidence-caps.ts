/**
 * The bounds on a run's paper evidence (docs/security.md#security-model): an agent writes it, so reading and syncing it must
 * cost the control plane a bounded amount whatever the agent leaves behind. Evidence sync and the evidence reader take
 * the same numbers, so what sync copies is what the reader accepts; evidence over a bound counts as missing.
 */
export const EVIDENCE_CAPS = {
  /** Evidence files per project: run_notes.md, the decision file and the results files together. */
  maxFiles: 200,
  /** Bytes of one evidence file. */
  maxFileBytes: 5 * 1024 * 1024,
  /** Bytes of all evidence files of one project together. */
  maxTotalBytes: 32 * 1024 * 1024,
  /** Directory entries looked at under results/, whatever they are. */
  maxEntriesVisited: 2_000,
  /** Directory levels under results/. */
  maxDepth: 8,
  /** Levels of nesting inside one results file; a deeper file is not evidence. */
  maxResultDepth: 64,
  /** Numbers kept from all results files together (the draft tabulates at most 200 of them). */
  maxResultValues: 10_000,
} as const;
