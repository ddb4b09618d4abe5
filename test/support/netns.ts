import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Another host, as tests make one (docs/testing.md#tests): a network namespace of its own joined to this one by a veth pair,
 * each end with an address of a /30 that the test picks from 10.231.0.0/16. Traffic goes only between the two ends.
 * Needs root (the machines run as root) and iproute2; a machine without them fails the test saying so, never skips it.
 */
export interface OtherHost {
  /** The namespace's name, for `ip netns exec`. */
  namespace: string;
  /** This side's address on the pair: a connection made from it reaches a local server as a client of another address. */
  localAddress: string;
  /** The namespace's address on the pair. */
  remoteAddress: string;
  remove(): Promise<void>;
}

let made = 0;

async function ip(...args: string[]): Promise<void> {
  try {
    await run('ip', args);
  } catch (error) {
    throw new Error(`ip ${args.join(' ')} failed (network namespaces need root and iproute2): ${(error as Error).message}`);
  }
}

export async function makeOtherHost(): Promise<OtherHost> {
  const index = (process.pid % 4096) * 4 + (made++ % 4);
  const subnet = `10.231.${Math.floor(index / 64) % 256}.${(index % 64) * 4}`;
  const base = subnet.split('.').map(Number);
  const address = (last: number) => `${base[0]}.${base[1]}.${base[2]}.${base[3]! + last}`;
  const tag = `${process.pid.toString(36)}${made}`;
  const namespace = `rcp-test-${tag}`;
  const local = `rcph${tag}`.slice(0, 15);
  const peer = `rcpn${tag}`.slice(0, 15);
  await ip('netns', 'add', namespace);
  const remove = async () => {
    await run('ip', ['link', 'del', local]).catch(() => undefined);
    await run('ip', ['netns', 'del', namespace]).catch(() => undefined);
  };
  try {
    await ip('link', 'add', local, 'type', 'veth', 'peer', 'name', peer);
    await ip('link', 'set', peer, 'netns', namespace);
    await ip('addr', 'add', `${address(1)}/30`, 'dev', local);
    await ip('link', 'set', local, 'up');
    await ip('netns', 'exec', namespace, 'ip', 'addr', 'add', `${address(2)}/30`, 'dev', peer);
    await ip('netns', 'exec', namespace, 'ip', 'link', 'set', peer, 'up');
    await ip('netns', 'exec', namespace, 'ip', 'link', 'set', 'lo', 'up');
  } catch (error) {
    await remove();
    throw error;
  }
  return { namespace, localAddress: address(1), remoteAddress: address(2), remove };
}
