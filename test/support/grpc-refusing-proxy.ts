import { connect, constants, createServer, type ClientHttp2Session, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import type { AddressInfo } from 'node:net';

/**
 * A real gRPC peer in front of a Temporal frontend: it passes every call through, byte for byte, except the methods
 * it is told to refuse, which it answers itself with a gRPC status, as Temporal Cloud answers the operator calls it
 * does not allow. `refusals` is read at each call, so a test may change it as it goes. Plaintext HTTP/2 (prior
 * knowledge), as the SDK speaks to a server without TLS.
 */
export interface RefusingProxy {
  /** host:port to give a client instead of the upstream's. */
  address: string;
  /** The paths of the calls it refused, in order. */
  refused: string[];
  close(): Promise<void>;
}

export interface Refusal {
  /** `/<package>.<Service>/<Method>` */
  path: string;
  /** A gRPC status code (7: PERMISSION_DENIED). */
  code: number;
  message: string;
}

const HOP_HEADERS = new Set([':status', ':method', ':path', ':authority', ':scheme', ':protocol']);
const plain = (headers: IncomingHttpHeaders): OutgoingHttpHeaders => Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_HEADERS.has(name)));

export async function startRefusingProxy(upstream: string, refusals: readonly Refusal[]): Promise<RefusingProxy> {
  const refused: string[] = [];
  let session: ClientHttp2Session | undefined;
  const upstreamSession = () => {
    if (!session || session.closed || session.destroyed) session = connect(`http://${upstream}`);
    return session;
  };
  const server = createServer();
  server.on('stream', (stream, headers) => {
    const path = String(headers[':path']);
    const refusal = refusals.find((each) => each.path === path);
    if (refusal) {
      refused.push(path);
      stream.resume();
      // A trailers-only answer: the status in the one header block that ends the call.
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(refusal.code), 'grpc-message': encodeURIComponent(refusal.message) }, { endStream: true });
      return;
    }
    const call = upstreamSession().request({ ':method': 'POST', ':path': path, ...plain(headers) });
    let trailers: OutgoingHttpHeaders = {};
    call.on('response', (answer, flags) => {
      if (flags & constants.NGHTTP2_FLAG_END_STREAM) {
        stream.respond(answer, { endStream: true });
        return;
      }
      stream.respond(answer, { waitForTrailers: true });
      call.pipe(stream);
    });
    call.on('trailers', (received) => (trailers = plain(received)));
    stream.on('wantTrailers', () => stream.sendTrailers(trailers));
    stream.pipe(call);
    call.on('error', () => stream.close(constants.NGHTTP2_INTERNAL_ERROR));
    stream.on('error', () => call.close(constants.NGHTTP2_CANCEL));
    stream.on('close', () => {
      if (!call.closed) call.close(constants.NGHTTP2_CANCEL);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    refused,
    async close() {
      session?.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
