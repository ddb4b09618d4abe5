import type { Payload } from '@temporalio/common';
import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';

/**
 * Request ids through workflows (docs/http.md#request-ids): the header the client set when an HTTP request started the
 * workflow is passed on to every activity and child workflow it schedules, so the audit rows they write name that
 * request. The header is metadata: it changes no recorded command, and histories without it replay as before.
 */

export const REQUEST_ID_HEADER = 'rcp-request-id';

export const interceptors: WorkflowInterceptorsFactory = () => {
  // One factory call per workflow: this is the workflow's own.
  let requestId: Payload | undefined;
  const withRequestId = <T extends { headers: Record<string, Payload> }>(input: T): T =>
    requestId && !input.headers[REQUEST_ID_HEADER] ? { ...input, headers: { ...input.headers, [REQUEST_ID_HEADER]: requestId } } : input;
  return {
    inbound: [
      {
        execute(input, next) {
          requestId = input.headers[REQUEST_ID_HEADER];
          return next(input);
        },
      },
    ],
    outbound: [
      {
        scheduleActivity: (input, next) => next(withRequestId(input)),
        scheduleLocalActivity: (input, next) => next(withRequestId(input)),
        startChildWorkflowExecution: (input, next) => next(withRequestId(input)),
      },
    ],
  };
};
