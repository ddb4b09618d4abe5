import { defaultPayloadConverter } from '@temporalio/common';
import type { ActivityInboundCallsInterceptor } from '@temporalio/worker';
import { withRequestId } from '../platform/store/request-context.ts';
import { REQUEST_ID_HEADER } from '../workflows/interceptors.ts';

/** An activity runs as done for the request its workflow's header names (workflows/interceptors.ts). */
export const requestIdActivityInterceptor = (): { inbound: ActivityInboundCallsInterceptor } => ({
  inbound: {
    execute(input, next) {
      const header = input.headers[REQUEST_ID_HEADER];
      const requestId = header ? defaultPayloadConverter.fromPayload<unknown>(header) : null;
      return typeof requestId === 'string' ? withRequestId(requestId, () => next(input)) : next(input);
    },
  },
});
