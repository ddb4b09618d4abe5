import type { FastifyInstance } from 'fastify';
import type { AppDeps } from './deps.ts';

export async function preflightRoutes(_app: FastifyInstance, _deps: AppDeps): Promise<void> {}
