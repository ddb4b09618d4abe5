import { isIPv6 } from 'node:net';
import { HttpError } from './errors.ts';

export interface FailureLimitOptions {
  /** Failures one client may have within a window before its next failure is answered 429. */
  maxFailures: number;
  windowMs: number;
  /** Clients remembered at once; the oldest window is forgotten first (a flood of addresses cannot grow memory). */
  maxClients?: number;
}

interface Window {
  startedAt: number;
  failures: number;
}

const DEFAULT_MAX_CLIENTS = 10_000;

/** Every loopback address, IPv4 (all of 127.0.0.0/8) and IPv6, is the one client `loopback`. */
export const LOOPBACK_CLIENT = 'loopback';

/**
 * The client a failure or a connection is counted for: the TCP peer's address, an IPv4-mapped IPv6 address as IPv4,
 * IPv6 per /64 (one host holds a whole /64, so counting per address would give it 2^64 budgets), and the whole
 * loopback range as one (every local process can connect from any of 127.0.0.0/8, so counting per address would give
 * a local process 16 million budgets).
 */
export function clientKey(address: string | undefined): string {
  if (!address) return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  const ipv4 = mapped ? mapped[1]! : address;
  if (ipv4.startsWith('127.') || address === '::1') return LOOPBACK_CLIENT;
  if (mapped) return ipv4;
  if (!isIPv6(address)) return address;
  const [head = '', tail = ''] = address.split('%')[0]!.split('::');
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const groups = [...headParts, ...Array<string>(8 - headParts.length - tailParts.length).fill('0'), ...tailParts];
  return `${groups.slice(0, 4).map((group) => Number.parseInt(group || '0', 16).toString(16)).join(':')}::/64`;
}

/** The 429 of a client that spent its budget of failures, with the seconds until its window ends. */
export function tooManyRequests(retryAfterSec: number): HttpError {
  return new HttpError(429, `too many requests; retry in ${retryAfterSec} s`, { 'retry-after': String(retryAfterSec) });
}

/**
 * Counts failures (wrong credentials) per client in fixed windows, in this process's memory. Only failures spend the
 * budget, and the limit is asked only once a request has failed: a request that succeeds is never refused by it.
 */
export class FailureLimit {
  private readonly windows = new Map<string, Window>();
  private readonly options: Required<FailureLimitOptions>;

  constructor(options: FailureLimitOptions) {
    this.options = { maxClients: DEFAULT_MAX_CLIENTS, ...options };
  }

  /**
   * Counts a failure of `client`; throws 429 with Retry-After when the client has already spent its budget in the
   * current window (that failure is then not counted again).
   */
  fail(client: string, now = Date.now()): void {
    const window = this.current(client, now);
    if (window.failures >= this.options.maxFailures) throw tooManyRequests(Math.max(1, Math.ceil((window.startedAt + this.options.windowMs - now) / 1000)));
    window.failures += 1;
  }

  private current(client: string, now: number): Window {
    const found = this.windows.get(client);
    if (found && now - found.startedAt < this.options.windowMs) return found;
    this.windows.delete(client);
    if (this.windows.size >= this.options.maxClients) this.windows.delete(this.windows.keys().next().value!);
    const fresh = { startedAt: now, failures: 0 };
    this.windows.set(client, fresh);
    return fresh;
  }
}
