import { connect, type Socket } from 'node:net';

export interface RawConnection {
  socket: Socket;
  /** Everything the server sent, once the connection closed, and how long after connecting it closed. */
  closed: Promise<{ text: string; afterMs: number }>;
  /** Whether the connection is still open. */
  isOpen(): boolean;
}

/**
 * A TCP connection to the server of `url` that writes `bytes` (as they are, possibly an unfinished request) once
 * connected; from `localAddress` when given (any of 127/8 reaches a loopback server, which counts all of them as one client).
 */
export function rawConnection(url: string, bytes = '', localAddress?: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), ...(localAddress ? { localAddress } : {}) });
    let text = '';
    let open = true;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    const closed = new Promise<{ text: string; afterMs: number }>((resolveClosed) => {
      socket.once('close', () => {
        open = false;
        resolveClosed({ text, afterMs: Date.now() - connectedAt });
      });
    });
    let connectedAt = Date.now();
    socket.once('error', reject);
    socket.once('connect', () => {
      connectedAt = Date.now();
      // A reset by the server shows as the close above; it is not a failure of the test's own.
      socket.off('error', reject).on('error', () => undefined);
      if (bytes) socket.write(bytes);
      resolve({ socket, closed, isOpen: () => open });
    });
  });
}

/** A request that announces a 100-byte body and sends 10 bytes of it: the stalled client of docs/http.md#http-conventions. */
export function stalledBodyRequest(path: string, headers: Record<string, string> = {}): string {
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n${extra}\r\n{"stalled"`;
}

/** True when something accepts TCP connections on host:port. */
export function acceptsConnections(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
