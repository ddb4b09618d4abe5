import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponses } from '../../platform/http/responses.ts';
import { SESSION_COOKIE } from '../auth.ts';

const DASHBOARD_DIR = fileURLToPath(new URL('../../dashboard/', import.meta.url));
const ASSETS_DIR = `${DASHBOARD_DIR}assets/`;
export const DASHBOARD_PATH = '/control/dashboard-v2';
export const DASHBOARD_ASSETS_PATH = `${DASHBOARD_PATH}/assets`;

/**
 * The shell loads its code and styles from this origin only: no inline script or style, no eval, and Trusted Types
 * enforced, so an assignment of a string to `innerHTML` (or any other HTML sink) throws instead of parsing markup.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  // blob: for a run's result images, drawn from bytes the page read (dashboard/assets/run-files.js); never fetched.
  "img-src 'self' blob:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

interface Asset {
  body: Buffer;
  /** The same bytes gzipped once at start-up: a browser that accepts gzip gets about a third of the bytes. */
  gzipped: Buffer;
  type: string;
  etag: string;
}

/** Every file of dashboard/assets/, read once at start-up: the route serves these names and nothing else. */
function loadAssets(): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(ASSETS_DIR).sort()) {
    const type = CONTENT_TYPES[extname(name)];
    if (!type) continue;
    const body = readFileSync(`${ASSETS_DIR}${name}`);
    assets.set(name, { body, gzipped: gzipSync(body, { level: 9 }), type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` });
  }
  return assets;
}

/** Whether an Accept-Encoding header takes gzip: named with a weight above 0, or not named and `*` is. */
export function acceptsGzip(header: string | undefined): boolean {
  const weights = new Map<string, number>();
  for (const part of (header ?? '').split(',')) {
    const [coding = '', ...params] = part.trim().toLowerCase().split(';').map((piece) => piece.trim());
    const q = params.find((param) => param.startsWith('q='));
    weights.set(coding, q === undefined ? 1 : Number(q.slice(2)));
  }
  return (weights.get('gzip') ?? weights.get('*') ?? 0) > 0;
}

const htmlPage = (description: string) => ({ description, content: { 'text/html': { schema: z.string() } } });
const redirect = z.null().describe(`Redirect to ${DASHBOARD_PATH}`);
const tags = ['dashboard'];

/** The dashboard shell, its static modules and styles, and its icon; public, since the shell signs in with the API's session route. */
export async function dashboardRoutes(instance: FastifyInstance): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const html = readFileSync(`${DASHBOARD_DIR}index.html`, 'utf8');
  const favicon = readFileSync(`${DASHBOARD_DIR}favicon.ico`);
  const assets = loadAssets();
  const config = { auth: 'public' } as const;

  // The shell says whether the browser sent a session cookie at all (it cannot read the HttpOnly cookie itself), so
  // a first visit goes straight to sign-in instead of asking the session route for a 401.
  const cookieMarker = '<meta name="rcp-session-cookie" content="absent">';
  if (!html.includes(cookieMarker)) throw new Error(`dashboard/index.html lacks ${cookieMarker}`);
  const shells = { absent: html, present: html.replace(cookieMarker, cookieMarker.replace('absent', 'present')) };
  app.get(DASHBOARD_PATH, { config, schema: { tags, summary: 'Dashboard shell', response: { 200: htmlPage('The dashboard shell') } } }, async (request, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', DASHBOARD_CSP)
      .send(request.cookies?.[SESSION_COOKIE] ? shells.present : shells.absent),
  );

  const assetSchema = {
    tags,
    summary: 'A static module or style sheet of the dashboard (revalidated by ETag)',
    params: z.strictObject({ file: z.string().min(1).max(100).describe(`One of: ${[...assets.keys()].join(', ')}`) }),
    response: {
      200: { description: 'The file', content: Object.fromEntries([...new Set(Object.values(CONTENT_TYPES))].map((type) => [type, { schema: z.string() }])) },
      304: z.null().describe('Not modified since the ETag sent in If-None-Match'),
      ...errorResponses(404),
    },
  };
  // Registered untyped, like the icon: the files are bytes, which a zod string schema documents but cannot type.
  const revalidated = { ETag: { type: 'string', description: 'The file\'s version; send it back in If-None-Match' }, 'Cache-Control': { type: 'string', description: 'no-cache' } } as const;
  instance.get<{ Params: { file: string } }>(`${DASHBOARD_ASSETS_PATH}/:file`, { config: { ...config, answerHeaders: { 200: revalidated, 304: revalidated } }, schema: assetSchema }, async (request, reply) => {
    const asset = assets.get(request.params.file);
    if (!asset) return reply.code(404).send({ detail: 'Not Found' });
    // no-cache, not no-store: the browser keeps the file but asks again, so a new release is picked up at once.
    reply.header('cache-control', 'no-cache').header('etag', asset.etag).header('vary', 'accept-encoding');
    if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
    if (acceptsGzip(request.headers['accept-encoding'])) {
      return reply.type(asset.type).header('content-encoding', 'gzip').send(asset.gzipped);
    }
    return reply.type(asset.type).send(asset.body);
  });

  const redirected = { config: { ...config, answerHeaders: { 307: { Location: { type: 'string', description: DASHBOARD_PATH } } } } } as const;
  app.get('/control/dashboard', { ...redirected, schema: { tags, summary: 'Redirect to the dashboard', response: { 307: redirect } } }, async (_request, reply) => reply.redirect(DASHBOARD_PATH, 307));
  app.get('/dashboard', { ...redirected, schema: { tags, summary: 'Redirect to the dashboard', response: { 307: redirect } } }, async (_request, reply) => reply.redirect(DASHBOARD_PATH, 307));
  // Registered untyped: the icon is bytes, which a zod string schema documents but cannot type.
  instance.get(
    '/favicon.ico',
    { config, schema: { tags, summary: 'The dashboard\'s icon', response: { 200: { description: 'The icon', content: { 'image/x-icon': { schema: z.string().meta({ format: 'binary' }) } } } } } },
    async (_request, reply) => reply.type('image/x-icon').header('cache-control', 'public, max-age=86400').send(favicon),
  );
}
