import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { testPort } from '../support/ports.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t.close());

async function login() {
  const response = await t.app.inject({ method: 'POST', url: '/control/api/session', payload: { token: TEST_TOKEN } });
  expect(response.statusCode).toBe(200);
  const setCookie = String(response.headers['set-cookie']);
  return { response, setCookie, cookie: setCookie.split(';')[0]!, csrf: response.json().csrf_token as string };
}

describe('dashboard session', () => {
  it('refuses a wrong token with 401', async () => {
    const response = await t.app.inject({ method: 'POST', url: '/control/api/session', payload: { token: 'wrong' } });
    expect(response.statusCode).toBe(401);
    expect(response.headers['set-cookie']).toBeUndefined();
  });

  it('sets an HttpOnly, SameSite=Strict cookie scoped to /control holding a random id, not the token', async () => {
    const { setCookie, cookie, csrf } = await login();
    expect(setCookie).toMatch(/^cp_session=[A-Za-z0-9_-]{43};/);
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Strict');
    expect(setCookie).toContain('Path=/control');
    expect(setCookie).not.toContain('Secure');
    expect(cookie).not.toContain(TEST_TOKEN);
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const stored = await t.store.query<{ id_hash: string }>('SELECT id_hash FROM sessions');
    expect(stored.rows.map((row) => row.id_hash)).not.toContain(cookie.split('=')[1]);
  });

  it('authenticates reads with the cookie and requires X-CSRF-Token for anything else', async () => {
    const { cookie, csrf } = await login();
    expect((await t.app.inject({ method: 'GET', url: '/control/health', headers: { cookie } })).statusCode).toBe(200);

    const again = await t.app.inject({ method: 'GET', url: '/control/api/session', headers: { cookie } });
    expect(again.json()).toEqual({ csrf_token: csrf });

    const noCsrf = await t.app.inject({ method: 'DELETE', url: '/control/api/session', headers: { cookie } });
    expect(noCsrf.statusCode).toBe(403);
    expect(noCsrf.json()).toEqual({ detail: 'missing or invalid CSRF token' });
    const wrongCsrf = await t.app.inject({ method: 'DELETE', url: '/control/api/session', headers: { cookie, 'x-csrf-token': 'nope' } });
    expect(wrongCsrf.statusCode).toBe(403);
  });

  it('logs out: the cookie stops working and both changes are in the audit log', async () => {
    const { cookie, csrf } = await login();
    const logout = await t.app.inject({ method: 'DELETE', url: '/control/api/session', headers: { cookie, 'x-csrf-token': csrf } });
    expect(logout.statusCode).toBe(200);
    expect(String(logout.headers['set-cookie'])).toMatch(/cp_session=;.*(Max-Age=0|Expires=Thu, 01 Jan 1970)/);
    expect((await t.app.inject({ method: 'GET', url: '/control/health', headers: { cookie } })).statusCode).toBe(401);

    const events = await t.app.inject({ method: 'GET', url: '/control/api/events?entity_type=dashboard_session', headers: t.auth });
    const types = (events.json().items as { event_type: string }[]).map((event) => event.event_type);
    expect(types).toContain('dashboard_session.created');
    expect(types).toContain('dashboard_session.deleted');
  });

  it('expires a session idle for more than 30 minutes and forgets it at the next login', async () => {
    const { cookie } = await login();
    await t.store.query(`UPDATE sessions SET last_seen_at = clock_timestamp() - interval '31 minutes'`);
    expect((await t.app.inject({ method: 'GET', url: '/control/health', headers: { cookie } })).statusCode).toBe(401);
    await login();
    const stored = await t.store.query('SELECT id_hash FROM sessions');
    expect(stored.rows).toHaveLength(1);
  });

  it('marks the cookie Secure when session_cookie_secure is set', async () => {
    const secure = await startTestApp({ sessionCookieSecure: true });
    try {
      const response = await secure.app.inject({ method: 'POST', url: '/control/api/session', payload: { token: TEST_TOKEN } });
      expect(String(response.headers['set-cookie'])).toContain('Secure');
    } finally {
      await secure.close();
    }
  });
});

describe('sign-in rate limit', () => {
  const attempt = (remoteAddress: string, token = 'wrong-token') =>
    t.app.inject({ method: 'POST', url: '/control/api/session', payload: { token }, remoteAddress });

  it('answers the 11th wrong attempt from one address within a minute with 429 and Retry-After', async () => {
    for (let i = 0; i < 10; i += 1) expect((await attempt('203.0.113.7')).statusCode).toBe(401);
    const limited = await attempt('203.0.113.7');
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toEqual({ detail: expect.stringMatching(/^too many requests; retry in \d+ s$/) });
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.headers['set-cookie']).toBeUndefined();
  });

  it('spends nothing on successful sign-ins, and counts an IPv6 client per /64', async () => {
    for (let i = 0; i < 15; i += 1) expect((await attempt('203.0.113.10', TEST_TOKEN)).statusCode).toBe(200);
    expect((await attempt('203.0.113.10')).statusCode).toBe(401);
    for (let i = 0; i < 10; i += 1) await attempt(`2001:db8:1:2::${i + 1}`);
    expect((await attempt('2001:db8:1:2:ffff::9')).statusCode).toBe(429);
    expect((await attempt('2001:db8:1:3::1')).statusCode).toBe(401);
  });

  it('leaves other addresses and the other routes of a limited address alone', async () => {
    for (let i = 0; i < 11; i += 1) await attempt('203.0.113.8');
    expect((await attempt('203.0.113.8')).statusCode).toBe(429);
    expect((await attempt('203.0.113.9')).statusCode).toBe(401);
    const other = await t.app.inject({ method: 'GET', url: '/control/health', headers: t.auth, remoteAddress: '203.0.113.8' });
    expect(other.statusCode).toBe(200);
  });
});

describe('the sign-in limit on two replicas (one database)', () => {
  it('holds for the cluster: ten wrong sign-ins spread over both replicas spend one budget, and the correct token still signs in', async () => {
    const replica = await startTestApp({}, { replicaOf: t });
    try {
      const apps = [t.app, replica.app];
      const attemptOn = (index: number, token = 'wrong-token') =>
        apps[index % 2]!.inject({ method: 'POST', url: '/control/api/session', payload: { token }, remoteAddress: '198.51.100.20' });
      for (let i = 0; i < 10; i += 1) expect((await attemptOn(i)).statusCode).toBe(401);
      expect((await attemptOn(0)).statusCode).toBe(429);
      const limited = await attemptOn(1);
      expect(limited.statusCode).toBe(429);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect((await attemptOn(1, TEST_TOKEN)).statusCode).toBe(200);
      expect((await attemptOn(0, TEST_TOKEN)).statusCode).toBe(200);
    } finally {
      await replica.close();
    }
  });
});

describe('a local process guessing tokens (issue 32, L5)', () => {
  it('cannot lock the operator out: after its wrong sign-ins over real HTTP from the same address, the correct token signs in', async () => {
    const port = await testPort();
    await t.app.listen({ host: '127.0.0.1', port });
    const signIn = (token: string) =>
      fetch(`http://127.0.0.1:${port}/control/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
    const guesses = [];
    for (let i = 0; i < 12; i += 1) guesses.push((await signIn(`guess-${i}`)).status);
    // The earlier tests' wrong token (injected from 127.0.0.1) spent one failure of this address already.
    expect(guesses.slice(-3)).toEqual([429, 429, 429]);
    expect(guesses.filter((status) => status === 401).length).toBeLessThanOrEqual(10);
    const operator = await signIn(TEST_TOKEN);
    expect(operator.status).toBe(200);
    expect(operator.headers.get('set-cookie')).toMatch(/^cp_session=/);
  });
});
