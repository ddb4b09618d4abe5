import { createConnection, createServer } from 'node:net';

/** Local TCP ports and addresses: whether a port is free, a free one picked, whether one accepts, host:port split and joined. */

export function isPortFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolveFree) => {
    const server = createServer();
    server.once('error', () => resolveFree(false));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolveFree(true)));
  });
}

/** A port the OS considers free right now; the server binds it moments later. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const addr = server.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      server.close(() => (port > 0 ? resolvePort(port) : reject(new Error('no ephemeral port assigned'))));
    });
  });
}

export function tcpAccepts(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolveProbe) => {
    const socket = createConnection({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolveProbe(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export function hostForUrl(ip: string): string {
  return ip.includes(':') ? `[${ip}]` : ip;
}

export function splitAddress(address: string): [string, number] {
  const colon = address.lastIndexOf(':');
  return [address.slice(0, colon).replace(/^\[|\]$/g, ''), Number(address.slice(colon + 1))];
}
