import { request as httpRequest } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeOtherHost, type OtherHost } from '../support/netns.ts';
import { startTestApp, TEST_GATE_TOKEN, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { testPort } from '../support/ports.ts';
import { rawConnection, type RawConnection } from '../support/raw-socket.ts';

// Issue 32, L4: 256 idle connections with no credentials took every slot of http_max_connections, and each held its
// slot for the whole request timeout (30 s), so no other client got an answer: not an operator, not a callback, not an
// agent's event. The attack runs over real sockets against both roles on one server, scaled down.
const LIMITS = { requestTimeoutMs: 30_000, maxConnections: 8, maxConnectionsPerAddress: 4, firstRequestTimeoutMs: 2_000 };
/**
 * A local process can connect from any address of 127/8: the hoarder spreads its connections over two of them, and
 * all of loopback still counts as one client.
 */
const HOARDER_ADDRESSES = ['127.0.0.2', '127.0.0.3'];
// Node notices deadlines on a timer; a loaded CI pass has closed a connection 1,064 ms after its deadline.
const SLACK_MS = 1_500;
const REQUEST_TIMEOUT_ANSWER = /^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*\r\n\r\n\{"detail":"request timeout"\}$/;

let t: TestApp;
let url: string;
/** A client of another address: a host of its own (a network namespace), whose side of the pair connects here. */
let otherHost: OtherHost;

beforeAll(async () => {
  otherHost = await makeOtherHost();
  t = await startTestApp({}, { workerGate: true, logLevel: 'warn', server: { limits: LIMITS } });
  const port = await testPort();
  await t.app.listen({ host: '127.0.0.1', port });
  url = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  await t?.close();
  await otherHost?.remove();
});
// A failed test must not leave its connections holding slots the next one needs.
const opened: RawConnection[] = [];
afterEach(async () => {
  const closing = opened.splice(0);
  for (const connection of closing) connection.socket.destroy();
  await Promise.all(closing.map((connection) => connection.closed));
  // The server counts a connection until it has seen it close too.
  await pause(200);
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `count` connections that send nothing, from `localAddresses` in turn, opened one after another so the server counts
 * them in order.
 */
async function idleConnections(count: number, localAddresses: string[]): Promise<RawConnection[]> {
  const connections: RawConnection[] = [];
  for (let index = 0; index < count; index += 1) connections.push(await rawConnection(url, '', localAddresses[index % localAddresses.length]));
  opened.push(...connections);
  return connections;
}

/** The status of one request sent from `localAddress`. */
function statusFrom(localAddress: string, method: string, path: string, token: string, body?: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) };
    const sent = httpRequest(`${url}${path}`, { method, headers, localAddress }, (response) => {
      response.resume();
      response.once('end', () => resolve(response.statusCode ?? 0));
    });
    sent.once('error', reject);
    sent.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe('connection limits (docs/http.md#http-conventions, Limits)', () => {
  it('keeps a hoarding client to its share of connections, whatever loopback addresses it uses, and closes its idle ones after the first-request deadline', async () => {
    const connections = await idleConnections(LIMITS.maxConnections, HOARDER_ADDRESSES);
    const held = connections.slice(0, LIMITS.maxConnectionsPerAddress);
    const beyond = connections.slice(LIMITS.maxConnectionsPerAddress);
    await pause(300);
    expect(beyond.map((connection) => connection.isOpen())).toEqual(beyond.map(() => false));
    for (const connection of beyond) expect((await connection.closed).text).toBe('');
    expect(held.every((connection) => connection.isOpen())).toBe(true);

    // A client at another address is answered while the hoarder holds its share: an operator's read, an agent's
    // event, a gate route.
    expect(await statusFrom(otherHost.localAddress, 'GET', '/control/api/queue-health', TEST_TOKEN)).toBe(200);
    expect(await statusFrom(otherHost.localAddress, 'POST', '/legacy-agent/event', TEST_TOKEN, { event: 'session-start', run_id: 'run-of-nobody' })).toBe(200);
    expect(await statusFrom(otherHost.localAddress, 'GET', '/dashboard/api', TEST_GATE_TOKEN)).toBe(200);

    for (const connection of held) {
      const { text, afterMs } = await connection.closed;
      expect(text).toMatch(REQUEST_TIMEOUT_ANSWER);
      expect(afterMs).toBeGreaterThanOrEqual(LIMITS.firstRequestTimeoutMs - 50);
      expect(afterMs).toBeLessThan(LIMITS.firstRequestTimeoutMs + SLACK_MS);
    }
    // Its closed connections gave their places back.
    const again = await idleConnections(LIMITS.maxConnectionsPerAddress, HOARDER_ADDRESSES);
    await pause(300);
    expect(again.every((connection) => connection.isOpen())).toBe(true);
  }, 15_000);

  it('cuts only connections that have not delivered a request: a slow body and an idle keep-alive connection stay', async () => {
    const body = JSON.stringify({ event: 'session-start', run_id: 'run-of-nobody' });
    const head = `POST /legacy-agent/event HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    const slowBody = await rawConnection(url, head + body.slice(0, 5));
    const keptAlive = await rawConnection(url, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    opened.push(slowBody, keptAlive);
    await pause(LIMITS.firstRequestTimeoutMs + 500);
    expect(slowBody.isOpen()).toBe(true);
    expect(keptAlive.isOpen()).toBe(true);

    slowBody.socket.write(body.slice(5));
    expect((await slowBody.closed).text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    keptAlive.socket.destroy();
    expect((await keptAlive.closed).text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  }, 15_000);
});
