import { isIP } from 'node:net';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { HttpError } from './errors.ts';

/**
 * The Host header split into name and port, lower-cased; undefined when it is not `name[:port]` or `[v6][:port]`.
 */
export function parseHost(header: string): { name: string; port: string | undefined } | undefined {
  const match = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(header.trim());
  if (!match) return undefined;
  return { name: match[1]!.toLowerCase(), port: match[2] };
}

const isAddressLiteral = (name: string) => isIP(name.startsWith('[') ? name.slice(1, -1) : name) !== 0;

/**
 * Whether `header` names one of `allowed` (each `name` for any port, or `name:port` for that port alone). An IP
 * address always passes: DNS rebinding, what this check is for, needs a host name, and the service's own processes
 * (agents posting to the gate's event hook, a gate calling back the control plane on the same machine) address it
 * by IP.
 */
export function hostAllowed(header: string | undefined, allowed: readonly string[]): boolean {
  const host = header === undefined ? undefined : parseHost(header);
  if (!host) return false;
  if (isAddressLiteral(host.name)) return true;
  return allowed.some((entry) => {
    const permitted = parseHost(entry);
    return permitted !== undefined && permitted.name === host.name && (permitted.port === undefined || permitted.port === host.port);
  });
}

export interface AllowedHostsOptions {
  /** Host names (with or without port) this server answers to; empty answers any. */
  allowedHosts: readonly string[];
}

/**
 * Refuses a request for a host name this server is not configured for with 421 Misdirected Request, before
 * authentication and on every route, unknown paths included (docs/http.md#http-conventions).
 */
async function allowedHostsPlugin(app: FastifyInstance, { allowedHosts }: AllowedHostsOptions): Promise<void> {
  if (allowedHosts.length === 0) return;
  app.addHook('onRequest', (request, _reply, done) => {
    done(hostAllowed(request.headers.host, allowedHosts) ? undefined : new HttpError(421, 'host not allowed'));
  });
}

export const allowedHosts = fp(allowedHostsPlugin, { name: 'allowed-hosts' });
