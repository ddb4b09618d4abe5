import type { FastifyInstance } from 'fastify';
import type { AppDeps } from './deps.ts';

export async function runRoutes(_app: FastifyInstance, _deps: AppDeps): Promise<void> {}
