import type { HttpLimits } from '../../api/create-server.ts';
import type { Config } from '../../config/schema.ts';

/** The HTTP limits both roles' servers are built with (README "HTTP conventions"). */
export const httpLimitsFrom = (config: Config): HttpLimits => ({
  requestTimeoutMs: Math.round(config.http_request_timeout_sec * 1000),
  maxConnections: config.http_max_connections,
});
