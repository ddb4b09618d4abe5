import cookie from '@fastify/cookie';
import type { FastifyInstance } from 'fastify';
import { auth } from './auth.ts';
import { dashboardRoutes } from './dashboard.ts';
import type { AppDeps } from './deps.ts';
import { registerErrorHandling } from './errors.ts';
import { eventRoutes } from './events.ts';
import { healthRoutes } from './health.ts';
import { securityHeaders } from './security-headers.ts';
import { sessionRoutes } from './session.ts';
import { useZodValidation } from './validation.ts';

/**
 * The control-plane HTTP app as a Fastify plugin. Register it with fastify-plugin semantics (see create-server.ts)
 * so its hooks and error handling cover the whole server, including unknown routes.
 */
export async function controlPlaneApp(app: FastifyInstance, deps: AppDeps): Promise<void> {
  useZodValidation(app);
  // Command bodies are JSON only; anything else is 415 rather than a string the schema then refuses.
  app.removeContentTypeParser('text/plain');
  registerErrorHandling(app);
  await app.register(securityHeaders);
  await app.register(cookie);
  await app.register(auth, { store: deps.store, controlApiToken: deps.controlApiToken });

  await app.register(healthRoutes, deps);
  await app.register(eventRoutes, deps);
  await app.register(sessionRoutes, deps);
  await app.register(dashboardRoutes);
}
