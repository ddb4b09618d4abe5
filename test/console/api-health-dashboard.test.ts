import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';

const ASSETS = fileURLToPath(new URL('../../dashboard/assets/', import.meta.url));

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

  it('serves each module and style sheet of dashboard/assets with its type and an ETag, and nothing else', async () => {
    const files = readdirSync(ASSETS).filter((name) => /\.(js|css)$/.test(name));
    expect(files).toContain('app.js');
    for (const name of files) {
      const response = await t.app.inject({ method: 'GET', url: `/control/dashboard-v2/assets/${name}` });
      expect(response.statusCode, name).toBe(200);
      expect(response.headers['content-type']).toBe(name.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8');
      expect(response.body).toBe(readFileSync(join(ASSETS, name), 'utf8'));
      const again = await t.app.inject({ method: 'GET', url: `/control/dashboard-v2/assets/${name}`, headers: { 'if-none-match': String(response.headers.etag) } });
      expect(again.statusCode, name).toBe(304);
      const gzipped = await t.app.inject({ method: 'GET', url: `/control/dashboard-v2/assets/${name}`, headers: { 'accept-encoding': 'gzip, deflate, br' } });
      expect(gzipped.headers['content-encoding']).toBe('gzip');
      expect(gunzipSync(gzipped.rawPayload).toString('utf8')).toBe(response.body);
    }
    for (const url of ['/control/dashboard-v2/assets/nope.js', '/control/dashboard-v2/assets/..%2F..%2Fpackage.json', '/control/dashboard-v2/assets/tsconfig.json']) {
      const response = await t.app.inject({ method: 'GET', url });
      expect(response.statusCode, url).toBe(404);
    }
  });

  it('gzips a file only for a browser that takes gzip', async () => {
    const encoding = async (acceptEncoding: string) =>
      (await t.app.inject({ method: 'GET', url: '/control/dashboard-v2/assets/app.js', headers: { 'accept-encoding': acceptEncoding } })).headers['content-encoding'];
    for (const taken of ['gzip', 'br, gzip;q=0.5', '*', 'identity;q=1, *;q=0.1', 'GZIP']) expect(await encoding(taken), taken).toBe('gzip');
    for (const refused of ['', 'identity', 'br', 'gzip;q=0', '*;q=0', 'br, *;q=0, gzip;q=0']) expect(await encoding(refused), refused).toBeUndefined();
    expect(await encoding('*;q=0, gzip')).toBe('gzip');
  });

  it('tells the shell whether a session cookie came with the request, and nothing about its value', async () => {
    const without = (await t.app.inject({ method: 'GET', url: '/control/dashboard-v2' })).body;
    expect(without).toContain('<meta name="rcp-session-cookie" content="absent">');
    const withCookie = (await t.app.inject({ method: 'GET', url: '/control/dashboard-v2', headers: { cookie: 'cp_session=some-value-1234' } })).body;
    expect(withCookie).toContain('<meta name="rcp-session-cookie" content="present">');
    expect(withCookie).not.toContain('some-value-1234');
  });

  it('keeps the code free of HTML sinks and of writes to browser storage', () => {
    for (const name of readdirSync(ASSETS).filter((file) => file.endsWith('.js'))) {
      const source = readFileSync(join(ASSETS, name), 'utf8');
      expect(source, name).not.toMatch(/\.(innerHTML|outerHTML)\s*[+]?=|\.insertAdjacentHTML\(|document\.write|\beval\(|new Function|setHTMLUnsafe|createContextualFragment/);
      expect(source, name).not.toMatch(/(localStorage|sessionStorage)\.setItem|indexedDB/);
      // The only cookie a script writes is the expiry of a legacy one while clearing.
      for (const write of source.match(/document\.cookie\s*=.*/g) ?? []) expect(write, name).toContain('Max-Age=0');
    }
  });

  it('serves the favicon', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/favicon.ico' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('image/x-icon');
    expect(response.rawPayload.subarray(0, 4)).toEqual(Buffer.from([0, 0, 1, 0]));
  });
});
