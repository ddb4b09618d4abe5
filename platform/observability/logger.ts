import pino, { type DestinationStream, type Logger } from 'pino';
import { redactCredentialQuery } from '../http/url-credentials.ts';

// No `req.headers.*` paths: every value logged under `req` goes through the serializer below, which keeps no headers,
// and redacting an object costs every request line a copy of it.
const HTTP_SECRET_PATHS = [
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
];

/** Secret config fields wherever a config object is logged, plus each worker target's token. */
export function redactPaths(secretConfigFields: readonly string[]): string[] {
  const configPaths = secretConfigFields.flatMap((field) => [`config.${field}`, field]);
  return [...HTTP_SECRET_PATHS, ...configPaths, 'config.worker_targets.*.bearer_token', 'token', 'csrf_token'];
}

export interface LoggerOptions {
  level?: string;
  secretConfigFields: readonly string[];
  destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: 'research-control-plane' },
      redact: { paths: redactPaths(options.secretConfigFields), censor: '[Redacted]' },
      serializers: {
        req: (request: { method?: string; url?: string; id?: string; ip?: string }) => ({
          method: request.method,
          url: request.url ? redactCredentialQuery(request.url) : request.url,
          request_id: request.id,
          remote_address: request.ip,
        }),
      },
    },
    options.destination,
  );
}
