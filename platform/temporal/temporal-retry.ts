import { status } from '@grpc/grpc-js';
import { isGrpcServiceError, ServiceError } from '@temporalio/client';

/** The answers of a Temporal server that is busy or still starting: the same call may well succeed a moment later. */
const TRANSIENT_CODES: ReadonlySet<number> = new Set([status.DEADLINE_EXCEEDED, status.UNAVAILABLE]);

/**
 * A call the native connection gave up on at its own deadline: it reports CANCELLED with this message, not
 * DEADLINE_EXCEEDED (a loaded CI machine ended a start-up with "Failed to describe schedule: Timeout expired").
 */
const CLIENT_DEADLINE_MESSAGE = 'Timeout expired';

/**
 * The native connection's words for an HTTP/2 stream or connection that broke under the call (a reset, a GOAWAY):
 * the request may or may not have reached the server, and its code follows the broken frame's reason (INTERNAL for most),
 * so the words tell it, not the code. A loaded CI machine ended a start-up with "Failed to describe schedule: h2
 * protocol error: http2 error" while the embedded server was busy.
 */
const BROKEN_STREAM_PREFIX = 'h2 protocol error';

/**
 * Whether a client call failed for a reason that passes. Most calls wrap the gRPC error in a ServiceError; the start of
 * a run with its update (executeUpdateWithStart) throws a ServiceError that carries the gRPC status itself.
 */
export function isTransientTemporalError(error: unknown): boolean {
  const grpc = error instanceof ServiceError && error.cause !== undefined ? error.cause : error;
  if (!isGrpcServiceError(grpc)) return false;
  return (
    TRANSIENT_CODES.has(grpc.code) ||
    (grpc.code === status.CANCELLED && grpc.message === CLIENT_DEADLINE_MESSAGE) ||
    grpc.message.startsWith(BROKEN_STREAM_PREFIX)
  );
}

/**
 * Runs an idempotent call, trying it again while it fails transiently, with a doubling pause (from 0.5 s, at most 5 s),
 * until `withinMs` has passed; any other failure, or the last one, is thrown.
 */
export async function retryingTransient<T>(call: () => Promise<T>, withinMs: number): Promise<T> {
  const giveUpAt = Date.now() + withinMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      const pauseMs = Math.min(5_000, 500 * 2 ** (attempt - 1));
      if (!isTransientTemporalError(error) || Date.now() + pauseMs > giveUpAt) throw error;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
}
