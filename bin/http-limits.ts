import { firstRequestTimeoutMs, type HttpLimits } from '../api/create-server.ts';
import type { Config } from '../platform/config/schema.ts';

/** The HTTP limits both roles' servers are built with (docs/http.md#http-conventions). */
export const httpLimitsFrom = (config: Config): HttpLimits => {
  const requestTimeoutMs = Math.round(config.http_request_timeout_sec * 1000);
  return {
    requestTimeoutMs,
    maxConnections: config.http_max_connections,
    maxConnectionsPerAddress: Math.min(config.http_max_connections_per_address, config.http_max_connections),
    firstRequestTimeoutMs: firstRequestTimeoutMs(requestTimeoutMs),
  };
};

/**
 * RCP_CHECK_ANSWERS=1 checks every answer against its response schema before it is sent (docs/http.md#http-conventions,
 * answers): the test suite sets it for the processes it starts. Off, answers are only serialized.
 */
export const checkAnswersFromEnvironment = (): boolean => process.env.RCP_CHECK_ANSWERS === '1';
