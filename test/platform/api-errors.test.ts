import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../platform/observability/logger.ts';
import { SECRET_FIELDS } from '../../platform/config/schema.ts';
import type { Store } from '../../platform/store/store.ts';
import { LogCapture, startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t.close());

describe('error shapes', () => {
  it('404 for an unknown route', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/control/api/nope', headers: t.auth });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({ detail: 'Not Found' });
  });

  it('413 for a body over 1 MiB', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/control/api/session',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ token: 'x'.repeat(1024 * 1024 + 10) }),
    });
    expect(response.statusCode).toBe(413);
    expect(response.json()).toEqual({ detail: expect.stringContaining('1048576') });
  });

  it('422 with loc for a bad query, listing each problem', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/control/api/events?page=0&page_size=501', headers: t.auth });
    expect(response.statusCode).toBe(422);
    const detail = (response.json() as { detail: { loc: string[]; msg: string; type: string }[] }).detail;
    expect(detail.map((problem) => problem.loc)).toEqual([
      ['query', 'page'],
      ['query', 'page_size'],
    ]);
    for (const problem of detail) {
      expect(problem.msg).toEqual(expect.any(String));
      expect(problem.type).toEqual(expect.any(String));
    }
  });

  it('422 for unknown fields, wrong types and missing fields in a command body', async () => {
    const unknown = await t.app.inject({ method: 'POST', url: '/control/api/session', payload: { token: 'abc', remember: true } });
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json().detail).toEqual([{ loc: ['body', 'remember'], msg: 'unknown field', type: 'unrecognized_keys' }]);

    const wrongType = await t.app.inject({ method: 'POST', url: '/control/api/session', payload: { token: 42 } });
    expect(wrongType.json().detail[0]).toMatchObject({ loc: ['body', 'token'], type: 'invalid_type' });

    const missing = await t.app.inject({ method: 'POST', url: '/control/api/session', payload: {} });
    expect(missing.statusCode).toBe(422);
    expect(missing.json().detail[0].loc).toEqual(['body', 'token']);
  });

  it('422 for a query parameter or a body that a route does not describe', async () => {
    const query = await t.app.inject({ method: 'GET', url: '/control/api/v1/lanes?verbose=1', headers: t.auth });
    expect(query.statusCode).toBe(422);
    expect(query.json().detail).toEqual([{ loc: ['query', 'verbose'], msg: 'unknown field', type: 'unrecognized_keys' }]);
    const described = await t.app.inject({ method: 'GET', url: '/control/api/v1/runs?verbose=1', headers: t.auth });
    expect(described.statusCode).toBe(422);
    expect(described.json().detail).toEqual([{ loc: ['query', 'verbose'], msg: 'unknown field', type: 'unrecognized_keys' }]);
    const events = await t.app.inject({ method: 'GET', url: '/control/api/events?verbose=1', headers: t.auth });
    expect(events.statusCode).toBe(422);
    const body = await t.app.inject({ method: 'DELETE', url: '/control/api/session', headers: t.auth, payload: { everywhere: true } });
    expect(body.statusCode).toBe(422);
    expect(body.json().detail).toEqual([{ loc: ['body'], msg: 'this route takes no body', type: 'body_not_allowed' }]);
  });

  it('422 for malformed JSON', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/control/api/session',
      headers: { 'content-type': 'application/json' },
      payload: '{"token": ',
    });
    expect(response.statusCode).toBe(422);
    expect(response.json().detail[0]).toMatchObject({ loc: ['body'], type: 'json_invalid' });
  });

  it('415 in the same shape for a body that is not JSON', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/control/api/session',
      headers: { 'content-type': 'text/plain' },
      payload: 'token=abc',
    });
    expect(response.statusCode).toBe(415);
    expect(response.json()).toEqual({ detail: expect.any(String) });
  });

  it('400 and 414 in the same shape and headers for a URL the router cannot take, 401 first without credentials', async () => {
    const badEncoding = await t.app.inject({ method: 'GET', url: '/control/api/v1/runs/%zz', headers: t.auth });
    expect(badEncoding.statusCode).toBe(400);
    expect(badEncoding.json()).toEqual({ detail: 'the request URL is not valid percent-encoding' });
    const longParameter = await t.app.inject({ method: 'GET', url: `/control/api/v1/runs/${'r'.repeat(600)}`, headers: t.auth });
    expect(longParameter.statusCode).toBe(414);
    expect(longParameter.json()).toEqual({ detail: 'a path parameter is too long' });
    for (const response of [badEncoding, longParameter]) {
      expect(response.headers['x-request-id']).toEqual(expect.any(String));
      expect(response.headers['x-content-type-options']).toBe('nosniff');
    }
    const anonymous = await t.app.inject({ method: 'GET', url: '/control/api/v1/runs/%zz' });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json()).toEqual({ detail: 'invalid bearer token' });
    expect(anonymous.headers['www-authenticate']).toBe('Bearer');
  });

  it('500 with a request id and no internals when something unexpected breaks', async () => {
    const failing: Store = {
      ...t.store,
      query: async () => {
        throw new Error('connection to 10.0.0.5 failed: password authentication failed for user admin');
      },
    };
    const broken = await startTestApp({ store: failing });
    try {
      const response = await broken.app.inject({ method: 'GET', url: '/control/api/events', headers: broken.auth });
      expect(response.statusCode).toBe(500);
      const body = response.json() as { detail: string; request_id: string };
      expect(body).toEqual({ detail: 'internal error', request_id: response.headers['x-request-id'] });
      expect(response.body).not.toContain('password');
      expect(response.body).not.toContain('at ');
    } finally {
      await broken.close();
    }
  });
});

describe('headers', () => {
  it('every response carries the request id and security headers, 401s included', async () => {
    for (const response of [
      await t.app.inject({ method: 'GET', url: '/healthz' }),
      await t.app.inject({ method: 'GET', url: '/control/health' }),
      await t.app.inject({ method: 'GET', url: '/nope', headers: t.auth }),
    ]) {
      expect(response.headers['x-request-id']).toMatch(/.+/);
      expect(response.headers['x-content-type-options']).toBe('nosniff');
      expect(response.headers['x-frame-options']).toBe('DENY');
      expect(response.headers['referrer-policy']).toBe('no-referrer');
    }
  });

  it('keeps a well-formed incoming X-Request-Id and replaces a malformed one', async () => {
    const kept = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'trace-123' } });
    expect(kept.headers['x-request-id']).toBe('trace-123');
    const replaced = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'bad id <script>' } });
    expect(replaced.headers['x-request-id']).not.toContain('<');
  });

  it('HTML carries a restrictive Content-Security-Policy', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/control/dashboard-v2' });
    expect(response.headers['content-type']).toMatch(/^text\/html/);
    const csp = String(response.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("require-trusted-types-for 'script'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    // Nothing inline for the policy to allow: scripts and styles come from files.
    expect(response.body).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=/i);
  });
});

describe('secrets stay out of logs', () => {
  it('never writes the bearer token, session cookie or CSRF token', async () => {
    const login = await t.app.inject({ method: 'POST', url: '/control/api/session', payload: { token: TEST_TOKEN } });
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const csrf = login.json().csrf_token as string;
    await t.app.inject({ method: 'GET', url: '/control/api/events', headers: t.auth });
    await t.app.inject({ method: 'GET', url: `/control/api/events?token=${TEST_TOKEN}` });
    await t.app.inject({ method: 'DELETE', url: '/control/api/session', headers: { cookie, 'x-csrf-token': csrf } });
    await t.app.inject({ method: 'GET', url: '/control/api/nope', headers: { authorization: 'Bearer wrong-secret-value' } });

    expect(t.logs.lines.length).toBeGreaterThan(5);
    expect(t.logs.text).not.toContain(TEST_TOKEN);
    expect(t.logs.text).not.toContain(cookie.split('=')[1]!);
    expect(t.logs.text).not.toContain(csrf);
    expect(t.logs.text).not.toContain('wrong-secret-value');
  });

  it('censors every secret config field and worker target token when a config object is logged', () => {
    const capture = new LogCapture();
    const logger = createLogger({ secretConfigFields: SECRET_FIELDS, destination: capture });
    const secrets = Object.fromEntries(SECRET_FIELDS.map((field, index) => [field, `secret-value-${index}-${field}`]));
    const config = {
      ...secrets,
      listen_port: 8787,
      worker_targets: { gpu: { wake_gate_url: 'http://gpu:8790', bearer_token: 'secret-worker-target-token' } },
    };
    logger.info({ config }, 'configuration loaded');
    logger.info({ ...secrets }, 'fields at top level');
    expect(SECRET_FIELDS).toEqual(expect.arrayContaining(['control_api_bearer_token', 'completion_callback_token', 'pg_database_url']));
    expect(capture.text).toContain('"listen_port":8787');
    expect(capture.text).not.toContain('secret-value-');
    expect(capture.text).not.toContain('secret-worker-target-token');
  });
});
