import { z } from 'zod';

/** Body fields every command route takes alike: who asked, and the key that makes a retry replay-safe. */
export const requestedBy = z.string().trim().min(1).max(200);
export const idempotencyKey = z.string().min(1).max(256);
