import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { testPort } from './ports.ts';

/** What the gate answered to a dispatch the proxy held and then delivered. */
export interface DeliveredDispatch {
  status: number;
  body: Record<string, any>;
}

/**
 * A real HTTP proxy in front of a real worker gate that holds each `POST /dispatch` until the test releases it: a slow
 * network, or a gate slow to take the request. A held request is delivered to the gate when released, also when its
 * caller has given up on it meanwhile (its bytes were already on the way); every other request passes at once.
 */
export class SlowGate {
  readonly url: string;
  private readonly server: Server;
  private readonly held: { release: () => void; delivered: Promise<DeliveredDispatch>; callerGaveUpAt: () => number | null }[] = [];
  /** When each `POST /runs/{run_id}/cancel` arrived, by run id. */
  readonly cancelArrivedAt = new Map<string, number>();
  private waiting: (() => void)[] = [];
  /** How to answer the next `GET /gate-identity` calls: a status in place of the gate's (a gate restarting), or null to pass. */
  private readonly identityFailures: (number | null)[] = [];
  /** How many identity calls were answered from `identityFailures`. */
  identityFailed = 0;
  private releaseNext: (() => void)[] = [];

  private constructor(server: Server, url: string) {
    this.server = server;
    this.url = url;
  }

  static async start(gateUrl: string): Promise<SlowGate> {
    const port = await testPort();
    let proxy!: SlowGate;
    const server = createServer((request, response) => {
      void proxy.forward(gateUrl, request, response).then(
        ({ status, headers, text }) => {
          if (response.destroyed) return;
          response.writeHead(status, headers).end(text);
        },
        () => response.destroy(),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    proxy = new SlowGate(server, `http://127.0.0.1:${port}`);
    return proxy;
  }

  /** Resolves when a dispatch has arrived and is held; answers what the gate said once it is released. */
  async dispatchHeld(): Promise<{ release: () => Promise<DeliveredDispatch>; callerGaveUpAt: () => number | null }> {
    if (this.held.length === 0) await new Promise<void>((resolve) => this.waiting.push(resolve));
    const entry = this.held.shift()!;
    return {
      /** When the caller closed the held request's connection before it was answered; null while it waits. */
      callerGaveUpAt: entry.callerGaveUpAt,
      release: () => {
        entry.release();
        return entry.delivered;
      },
    };
  }

  /** The next identity proofs the gate is asked for: each fails with its status (as a restarting gate answers), or passes (null). */
  answerNextIdentities(answers: readonly (number | null)[]): void {
    this.identityFailures.push(...answers);
  }

  async down(): Promise<void> {
    for (const release of this.releaseNext) release();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async forward(gateUrl: string, request: IncomingMessage, response: ServerResponse): Promise<{ status: number; headers: Record<string, string>; text: string }> {
    const status = (request.url ?? '').startsWith('/gate-identity') ? this.identityFailures.shift() : undefined;
    if (typeof status === 'number') {
      this.identityFailed += 1;
      return { status, headers: { 'content-type': 'application/json' }, text: JSON.stringify({ detail: 'the gate is restarting' }) };
    }
    const cancel = /^\/runs\/([^/]+)\/cancel$/.exec(request.url ?? '');
    if (cancel) this.cancelArrivedAt.set(decodeURIComponent(cancel[1]!), Date.now());
    let body = '';
    for await (const chunk of request) body += chunk;
    const send = async () => {
      const headers: Record<string, string> = {};
      for (const name of ['authorization', 'content-type', 'accept']) {
        const value = request.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const answer = await fetch(`${gateUrl}${request.url}`, { method: request.method!, headers, ...(body ? { body } : {}), redirect: 'manual' });
      return { status: answer.status, headers: { 'content-type': answer.headers.get('content-type') ?? 'application/json' }, text: await answer.text() };
    };
    if (request.method !== 'POST' || request.url !== '/dispatch') return send();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    this.releaseNext.push(release);
    const delivered = released.then(send);
    let gaveUpAt: number | null = null;
    response.once('close', () => {
      if (!response.writableEnded) gaveUpAt = Date.now();
    });
    this.held.push({
      release,
      callerGaveUpAt: () => gaveUpAt,
      delivered: delivered.then(({ status, text }) => ({ status, body: JSON.parse(text) as Record<string, any> })),
    });
    for (const resolve of this.waiting.splice(0)) resolve();
    return delivered;
  }
}
