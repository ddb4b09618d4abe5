import type { ErrorMapper } from '../http/errors.ts';
import { CommandRefusedError } from '../services/command-errors.ts';
import { IdempotencyConflictError } from '../store/idempotency-keys.ts';
import { StoreReadOnlyError } from '../store/store.ts';

/** The control plane's own refusals as HTTP answers: a refused command, a reused idempotency key, a read-only store. */
export const controlPlaneErrorAnswers: ErrorMapper = (error) => {
  if (error instanceof CommandRefusedError) return { status: error.status, detail: error.detail };
  if (error instanceof IdempotencyConflictError) return { status: 409, detail: error.message };
  if (error instanceof StoreReadOnlyError) return { status: 501, detail: error.message };
  return undefined;
};
