import { join } from 'node:path';
import type { Config } from '../config/schema.ts';
import { RouteObservability } from './route-observability.ts';

/** route_observability_log_path, or `<state_dir>/route-observability.jsonl` when it is empty. */
export const routeObservabilityPath = (config: Config) => config.route_observability_log_path || join(config.state_dir, 'route-observability.jsonl');

/** The server options for route observability: the route log when enabled, and the RSS warning level either way. */
export function routeObservabilityFrom(config: Config): { routeObservability?: RouteObservability; memoryWarnRssMib: number } {
  return {
    memoryWarnRssMib: config.route_observability_memory_warn_rss_mib,
    ...(config.route_observability_enabled
      ? {
          routeObservability: new RouteObservability({
            path: routeObservabilityPath(config),
            slowMs: config.route_observability_slow_ms,
            memoryWarnRssMib: config.route_observability_memory_warn_rss_mib,
          }),
        }
      : {}),
  };
}
