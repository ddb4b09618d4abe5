import { createServer, type IncomingMessage, type Server } from 'node:http';

/**
 * A worker gate's callbacks delivered to every control-plane replica at the same moment (the fleet test): a gate posts
 * each callback here, and this server posts it to all replicas at once and answers the gate with the first 2xx (or,
 * when none took it, the last answer), so the gate's outbox retries exactly when no replica has the callback.
 */
export class CallbackFanOut {
  /** Callbacks that more than one replica took: delivered twice at once. */
  deliveredToSeveral = 0;
  received = 0;
  private readonly server: Server;

  private constructor(server: Server) {
    this.server = server;
  }

  static async start(host: string, port: number, replicaUrls: readonly string[]): Promise<CallbackFanOut> {
    let fanOut: CallbackFanOut | undefined;
    const server = createServer((request, response) => {
      void fanOut!.forward(request, replicaUrls).then(({ status, body }) => {
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(body);
      });
    });
    fanOut = new CallbackFanOut(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return fanOut;
  }

  get url(): string {
    const address = this.server.address();
    if (!address || typeof address === 'string') throw new Error('the fan-out server is not listening');
    return `http://${address.address}:${address.port}/control/api/worker-callback`;
  }

  private async forward(request: IncomingMessage, replicaUrls: readonly string[]): Promise<{ status: number; body: string }> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    // Transcript pushes go beside the callbacks (…/worker-transcript), to the same path of each replica.
    const path = request.url ?? '';
    if (!path.endsWith('/worker-transcript')) this.received += 1;
    const headers: Record<string, string> = {};
    for (const name of ['authorization', 'content-type', 'x-request-id']) {
      const value = request.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const answers = await Promise.all(
      replicaUrls.map(async (url) => {
        try {
          const answer = await fetch(new URL(path, url), { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
          return { status: answer.status, body: await answer.text() };
        } catch (error) {
          return { status: 502, body: JSON.stringify({ detail: `replica unreachable: ${(error as Error).message}` }) };
        }
      }),
    );
    const taken = answers.filter((answer) => answer.status >= 200 && answer.status < 300);
    if (taken.length > 1 && !path.endsWith('/worker-transcript')) this.deliveredToSeveral += 1;
    return taken[0] ?? answers.at(-1)!;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
