import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/** Applied to every HTML response that does not set a stricter policy of its own. */
export const DEFAULT_HTML_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** Headers every response carries, besides its `X-Request-Id`. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

async function securityHeadersPlugin(app: FastifyInstance): Promise<void> {
  // onRequest, so even a 401 from the auth hook carries them.
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers({ 'x-request-id': request.id, ...SECURITY_HEADERS });
    done();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    const type = reply.getHeader('content-type');
    if (typeof type === 'string' && type.startsWith('text/html') && !reply.hasHeader('content-security-policy')) {
      reply.header('content-security-policy', DEFAULT_HTML_CSP);
    }
    done(null, payload);
  });
}

export const securityHeaders = fp(securityHeadersPlugin, { name: 'security-headers' });
