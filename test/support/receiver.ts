import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { testPort } from './ports.ts';

/** One request as a loopback server under test received it, body read whole. */
export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A real HTTP server on 127.0.0.1 that reads each request's body whole, then hands it to `handle`. */
export async function startLoopbackServer(handle: (request: ReceivedRequest, response: ServerResponse) => void): Promise<{ origin: string; close: () => Promise<void> }> {
  const server: Server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => handle({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body }, response));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A receiver of posts (an alert channel): keeps every request and answers with `status`. */
export class Receiver {
  readonly received: ReceivedRequest[] = [];
  status = 200;
  private server!: { origin: string; close: () => Promise<void> };

  static async start(): Promise<Receiver> {
    const receiver = new Receiver();
    receiver.server = await startLoopbackServer((request, response) => {
      receiver.received.push(request);
      response.writeHead(receiver.status, { 'content-type': 'application/json' }).end('{"status":1}');
    });
    return receiver;
  }

  get url(): string {
    return `${this.server.origin}/hook`;
  }

  close(): Promise<void> {
    return this.server.close();
  }
}

/**
 * A loopback URL nothing listens on: a port of this worker's own slot (test/support/ports.ts), which no other test
 * file is handed, so nothing can start listening there while the test counts on it being closed.
 */
export async function closedUrl(): Promise<string> {
  return `http://127.0.0.1:${await testPort()}/hook`;
}
