import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { SECURITY_HEADERS } from './security-headers.ts';

/** What Node reports for a request it could not read, and what the client is told (docs/http.md#http-conventions). */
function answerFor(code: string | undefined): { status: number; detail: string } {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, detail: 'request timeout' };
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, detail: 'request headers too large' };
    default:
      return { status: 400, detail: 'bad request' };
  }
}

/**
 * Answers a request that never reached a route (it timed out before it was whole, or could not be parsed) with the
 * usual `{"detail": ...}` body, then closes the connection: what is left of that request cannot be read reliably.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // A response already under way on this connection (such as an early 401) must not be corrupted by a second one.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const { status, detail } = answerFor(error.code);
    const body = JSON.stringify({ detail });
    const headers = { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(body)), connection: 'close', 'x-request-id': randomUUID(), ...SECURITY_HEADERS };
    const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${head}\r\n${body}`);
  }
  socket.destroy(error);
}
