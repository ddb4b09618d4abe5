import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { answerClientError } from './client-errors.ts';
import { clientKey } from './failure-limit.ts';

/**
 * Closes a new connection at once, without an answer, when its client (counted as failures are: IPv4 per address,
 * IPv6 per /64) already holds `maxPerClient` open connections, so that one client cannot take every slot of
 * http_max_connections from the others.
 */
export function limitConnectionsPerClient(server: Server, maxPerClient: number, onRefused: () => void): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const client = clientKey(socket.remoteAddress);
    const held = open.get(client) ?? 0;
    if (held >= maxPerClient) {
      onRefused();
      socket.destroy();
      return;
    }
    open.set(client, held + 1);
    socket.once('close', () => {
      const left = open.get(client)! - 1;
      // Deleted at zero: clients that come and go must not grow the map.
      if (left === 0) open.delete(client);
      else open.set(client, left);
    });
  });
}

/**
 * Answers 408 and closes a new connection whose first request has not arrived (its headers whole) within
 * `deadlineMs`. A client that means to send a request sends it at once; one that connects and waits only holds a slot.
 * The deadline ends at the first request: a request whose body is slow is left to requestTimeout, and a keep-alive
 * connection between requests to keepAliveTimeout.
 */
export function closeConnectionsWithoutRequest(server: Server, deadlineMs: number): void {
  const deadlines = new WeakMap<Socket, NodeJS.Timeout>();
  server.on('connection', (socket: Socket) => {
    if (socket.destroyed) return;
    const deadline = setTimeout(() => answerClientError(firstRequestTimeout(), socket), deadlineMs);
    deadline.unref();
    deadlines.set(socket, deadline);
    socket.once('close', () => clearTimeout(deadline));
  });
  server.on('request', (request: { socket: Socket }) => {
    clearTimeout(deadlines.get(request.socket));
    deadlines.delete(request.socket);
  });
}

/** Node's own code for a request that did not arrive in time, so that the answer is the usual 408. */
const firstRequestTimeout = () => Object.assign(new Error('no request within the first-request deadline'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
