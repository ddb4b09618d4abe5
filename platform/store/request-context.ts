import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The request a piece of work is done for (docs/http.md#request-ids): the HTTP request id, set for the handling of an HTTP
 * request and, in the Temporal worker, for each activity of a workflow that request started. Audit rows written
 * without an explicit request id take this one, so a dispatch request joins its run's whole trail.
 */
const requestContext = new AsyncLocalStorage<{ requestId: string }>();

export function currentRequestId(): string | null {
  return requestContext.getStore()?.requestId ?? null;
}

/** Runs `work` as done for `requestId`. */
export function withRequestId<T>(requestId: string, work: () => T): T {
  return requestContext.run({ requestId }, work);
}

/** Makes the rest of the current asynchronous flow (an HTTP request's handling) done for `requestId`. */
export function enterRequest(requestId: string): void {
  requestContext.enterWith({ requestId });
}
