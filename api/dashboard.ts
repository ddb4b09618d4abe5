import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';

const DASHBOARD_DIR = fileURLToPath(new URL('../dashboard/', import.meta.url));
export const DASHBOARD_PATH = '/control/dashboard-v2';

const hashesOf = (html: string, tag: 'script' | 'style') =>
  [...html.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, 'g'))].map(
    (match) => `'sha256-${createHash('sha256').update(match[1]!).digest('base64')}'`,
  );

/** Only the shell's own inline script and style may run; it talks to this origin alone. */
export function dashboardCsp(html: string): string {
  return [
    "default-src 'none'",
    `script-src ${hashesOf(html, 'script').join(' ')}`,
    `style-src ${hashesOf(html, 'style').join(' ')}`,
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

const htmlPage = (description: string) => ({ description, content: { 'text/html': { schema: z.string() } } });
const redirect = z.null().describe(`Redirect to ${DASHBOARD_PATH}`);
const tags = ['dashboard'];

/** The dashboard shell and its icon; public, since the shell signs in with the API's session route. */
export async function dashboardRoutes(instance: FastifyInstance): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const html = readFileSync(`${DASHBOARD_DIR}index.html`, 'utf8');
  const csp = dashboardCsp(html);
  const favicon = readFileSync(`${DASHBOARD_DIR}favicon.ico`);
  const config = { auth: 'public' } as const;

  app.get(DASHBOARD_PATH, { config, schema: { tags, summary: 'Dashboard shell', response: { 200: htmlPage('The dashboard shell') } } }, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').header('content-security-policy', csp).send(html),
  );
  app.get('/control/dashboard', { config, schema: { tags, response: { 307: redirect } } }, async (_request, reply) => reply.redirect(DASHBOARD_PATH, 307));
  app.get('/dashboard', { config, schema: { tags, response: { 307: redirect } } }, async (_request, reply) => reply.redirect(DASHBOARD_PATH, 307));
  // Registered untyped: the icon is bytes, which a zod string schema documents but cannot type.
  instance.get(
    '/favicon.ico',
    { config, schema: { tags, response: { 200: { description: 'The icon', content: { 'image/x-icon': { schema: z.string().meta({ format: 'binary' }) } } } } } },
    async (_request, reply) => reply.type('image/x-icon').header('cache-control', 'public, max-age=86400').send(favicon),
  );
}
