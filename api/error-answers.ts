import type { ErrorMapper } from '../platform/http/errors.ts';
import { CommandRefusedError } from '../platform/command-errors.ts';
import { IdempotencyConflictError } from '../platform/store/idempotency-keys.ts';
import { STATEMENT_TIMEOUT_CODE, StoreReadOnlyError } from '../platform/store/store.ts';
import { isTransientTemporalError } from '../platform/temporal/temporal-retry.ts';

const isStatementTimeout = (error: unknown) =>
  typeof error === 'object' && error !== null && (error as { code?: unknown }).code === STATEMENT_TIMEOUT_CODE;

/**
 * The control plane's own refusals as HTTP answers: a refused command, a reused idempotency key, a read-only store,
 * a read model whose statement ran out of time, and a Temporal server that is down or restarting (the call may be
 * made again once it is back).
 */
export const controlPlaneErrorAnswers: ErrorMapper = (error) => {
  if (error instanceof CommandRefusedError) return { status: error.status, detail: error.detail };
  if (error instanceof IdempotencyConflictError) return { status: 409, detail: error.message };
  if (error instanceof StoreReadOnlyError) return { status: 501, detail: error.message };
  if (isStatementTimeout(error)) {
    return { status: 503, detail: 'the read ran past the read-model statement timeout and was cancelled; narrow it with filters or a smaller page_size' };
  }
  if (isTransientTemporalError(error)) {
    return { status: 503, detail: `the Temporal server could not be reached (${(error as Error).message.slice(0, 200)}); call again once it is back` };
  }
  return undefined;
};
