import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

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

export async function dashboardRoutes(app: FastifyInstance): Promise<void> {
  const html = readFileSync(`${DASHBOARD_DIR}index.html`, 'utf8');
  const csp = dashboardCsp(html);
  const favicon = readFileSync(`${DASHBOARD_DIR}favicon.ico`);

  app.get(DASHBOARD_PATH, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').header('content-security-policy', csp).send(html),
  );
  app.get('/control/dashboard', async (_request, reply) => reply.redirect(DASHBOARD_PATH, 307));
  app.get('/dashboard', async (_request, reply) => reply.redirect(DASHBOARD_PATH, 307));
  app.get('/favicon.ico', async (_request, reply) =>
    reply.type('image/x-icon').header('cache-control', 'public, max-age=86400').send(favicon),
  );
}
