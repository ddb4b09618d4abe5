import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { HttpError } from './errors.ts';

/**
 * Per-route request limits by client address (`config.rateLimit` on a route; nothing else is limited). Past its limit
 * a route answers 429 `{"detail": ...}` with `Retry-After` in seconds (README "HTTP conventions"). Counts live in this
 * process's memory, in a bounded cache, and IPv6 clients are counted per /64.
 */
export async function registerRateLimits(app: FastifyInstance): Promise<void> {
  await app.register(rateLimit, {
    global: false,
    errorResponseBuilder: (_request, context) => {
      const retryAfterSec = Math.max(1, Math.ceil(context.ttl / 1000));
      return new HttpError(429, `too many requests; retry in ${retryAfterSec} s`, { 'retry-after': String(retryAfterSec) });
    },
  });
}
