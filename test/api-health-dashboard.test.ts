import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    temporalHealth: async () => ({ ok: true, address: '127.0.0.1:7233', namespace: 'default', worker_state: 'RUNNING' }),
  });
});
afterAll(async () => t.close());

describe('health', () => {
  it('GET /healthz needs no token', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/healthz' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ ok: true, service: 'research-control-plane', timestamp: expect.any(String) });
    expect(Number.isNaN(Date.parse(response.json().timestamp))).toBe(false);
  });

  it('GET /control/health reports the store and Temporal', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/control/health', headers: t.auth });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({
      ok: true,
      service: 'research-control-plane',
      db_path: expect.stringMatching(/^postgres:\/\/127\.0\.0\.1:5432\//),
      store_backend: 'pg',
      temporal: { ok: true, address: '127.0.0.1:7233', namespace: 'default', worker_state: 'RUNNING' },
    });
  });

  it('answers 503 with ok false when Temporal is unreachable', async () => {
    const degraded = await startTestApp({
      temporalHealth: async () => {
        throw new Error('connection refused');
      },
    });
    try {
      const response = await degraded.app.inject({ method: 'GET', url: '/control/health', headers: degraded.auth });
      expect(response.statusCode).toBe(503);
      expect(response.json()).toMatchObject({ ok: false, temporal: { ok: false, error: 'connection refused' } });
    } finally {
      await degraded.close();
    }
  });
});

describe('dashboard routes', () => {
  it('serves the v2 shell without a token and redirects the old paths with 307', async () => {
    const shell = await t.app.inject({ method: 'GET', url: '/control/dashboard-v2' });
    expect(shell.statusCode).toBe(200);
    expect(shell.body).toContain('<title>Research control plane</title>');
    for (const url of ['/control/dashboard', '/dashboard']) {
      const redirect = await t.app.inject({ method: 'GET', url });
      expect(redirect.statusCode).toBe(307);
      expect(redirect.headers.location).toBe('/control/dashboard-v2');
    }
  });

  it('keeps the token out of browser storage: the shell never touches localStorage except to clear it', async () => {
    const shell = (await t.app.inject({ method: 'GET', url: '/control/dashboard-v2' })).body;
    expect(shell).not.toMatch(/localStorage\.setItem|sessionStorage\.setItem|document\.cookie\s*=\s*[^'"]*token/);
    expect(shell).toContain('localStorage.clear()');
  });

  it('serves the favicon', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/favicon.ico' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('image/x-icon');
    expect(response.rawPayload.subarray(0, 4)).toEqual(Buffer.from([0, 0, 1, 0]));
  });
});
