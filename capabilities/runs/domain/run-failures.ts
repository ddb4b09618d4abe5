/**
 * How the run activities fail, shared by the activities (which raise the failures) and the run workflow (which reads
 * them). Pure: no SDK import, so the workflow bundle stays small and the rules are testable on their own.
 */

/** Failure types no retry can cure: the activity is told not to retry, and the workflow's retry policies list them. */
export const PERMANENT_FAILURE_TYPES = {
  unknownRun: 'UnknownRun',
  unknownProject: 'UnknownProject',
  /** The store is read-only (control_plane_store_backend is pg_readonly): it never accepts a write. */
  storeReadOnly: 'StoreReadOnly',
  /** The database refused the write's data (a check, a foreign key, a malformed value): the same write fails again. */
  ledgerRejected: 'LedgerRejected',
  /** The worker gate refused the call (a 4xx): the same request gets the same answer. */
  gateRefused: 'WorkerGateRefused',
} as const;

/**
 * The run's lane is not a worker target of the replica whose worker ran the activity: retried, since another replica's
 * worker, which has it, may take the retry (a worker target added or removed one replica at a time).
 */
export const UNKNOWN_LANE = 'UnknownLane';

/** A gate call that may succeed on a later try: the gate was unreachable, timed out or answered 5xx. */
export const GATE_UNAVAILABLE = 'WorkerGateUnavailable';
/** A gate call that failed in this process before any answer (an unexpected error). */
export const GATE_CALL_FAILED = 'WorkerGateCallFailed';

/** The failure types that stop a ledger step's retries. */
export const LEDGER_NON_RETRYABLE: string[] = [
  PERMANENT_FAILURE_TYPES.unknownRun,
  PERMANENT_FAILURE_TYPES.unknownProject,
  PERMANENT_FAILURE_TYPES.storeReadOnly,
  PERMANENT_FAILURE_TYPES.ledgerRejected,
];

/** The failure types that stop a gate call's retries. */
export const GATE_NON_RETRYABLE: string[] = [
  PERMANENT_FAILURE_TYPES.gateRefused,
  PERMANENT_FAILURE_TYPES.unknownRun,
  PERMANENT_FAILURE_TYPES.unknownProject,
];

/** Why a gate call failed: the first detail of its failure. */
export interface GateFailureDetails {
  /** The gate's HTTP status; null when no answer came. */
  status: number | null;
}

/** Reads a gate failure's details; anything else (no details, another shape) reads as no status. */
export function gateFailureDetails(details: readonly unknown[] | null | undefined): GateFailureDetails {
  const first = details?.[0];
  const status = typeof first === 'object' && first !== null ? (first as { status?: unknown }).status : undefined;
  return { status: typeof status === 'number' && Number.isInteger(status) ? status : null };
}

/**
 * SQLSTATE classes of writes the database refuses for their data: 22 (data exception) and 23 (integrity constraint),
 * except a unique violation, which a concurrent writer can cause and a retry can get past.
 */
export function isRejectedWrite(sqlState: unknown): boolean {
  if (typeof sqlState !== 'string' || sqlState.length !== 5) return false;
  return (sqlState.startsWith('22') || sqlState.startsWith('23')) && sqlState !== '23505';
}

/** The run workflow's own failure when a ledger step cannot be recorded (its retries ran out or cannot help). */
export const RUN_LEDGER_FAILED = 'RunLedgerFailed';

/** What a RunLedgerFailed failure carries: the step that could not be recorded, and why. */
export interface RunLedgerFailureDetails {
  step: string;
  reason: string;
}

/** Reads a RunLedgerFailed failure's details; a failure recorded before they were attached reads as null. */
export function runLedgerFailureDetails(details: readonly unknown[] | null | undefined): RunLedgerFailureDetails | null {
  const first = details?.[0];
  if (typeof first !== 'object' || first === null) return null;
  const { step, reason } = first as { step?: unknown; reason?: unknown };
  return typeof step === 'string' && typeof reason === 'string' ? { step, reason } : null;
}
