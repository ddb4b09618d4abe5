import type { Headers } from '@temporalio/common';
import { defaultPayloadConverter } from '@temporalio/common';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import { currentRequestId } from '../store/request-context.ts';
import { REQUEST_ID_HEADER } from '../../workflows/interceptors.ts';

/** The HTTP request's id as a header of the workflows it starts, signals and updates (workflows/interceptors.ts). */
function withRequestId(headers: Headers): Headers {
  const requestId = currentRequestId();
  return requestId ? { ...headers, [REQUEST_ID_HEADER]: defaultPayloadConverter.toPayload(requestId) } : headers;
}

export const requestIdClientInterceptor: WorkflowClientInterceptor = {
  start: (input, next) => next({ ...input, headers: withRequestId(input.headers) }),
  startWithDetails: (input, next) => next({ ...input, headers: withRequestId(input.headers) }),
  signalWithStart: (input, next) => next({ ...input, headers: withRequestId(input.headers) }),
  startUpdateWithStart: (input, next) => next({ ...input, workflowStartHeaders: withRequestId(input.workflowStartHeaders), updateHeaders: withRequestId(input.updateHeaders) }),
};
