import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { hostLinkName, type ClusterNetwork, type GateHost } from './topology.ts';

const run = promisify(execFile);

/**
 * The worker hosts' network (docs/operations.md#running-on-several-machines, trying it locally): a bridge on this machine with
 * the cluster's first address, and for each gate a network namespace joined to it by a veth pair. Traffic goes only
 * between this machine and the namespaces. Needs root and iproute2.
 */

async function ip(...args: string[]): Promise<void> {
  try {
    await run('ip', args);
  } catch (error) {
    throw new Error(`ip ${args.join(' ')} failed (network namespaces need root and iproute2): ${(error as Error).message.trim()}`);
  }
}

const quietly = (args: string[]) => run('ip', args).then(() => undefined, () => undefined);

/** The cluster's namespaces that exist now, this start's or a crashed one's. */
export async function clusterNamespaces(network: ClusterNetwork): Promise<string[]> {
  const { stdout } = await run('ip', ['netns', 'list']).catch(() => ({ stdout: '' }));
  return stdout.split('\n').map((line) => line.split(' ')[0]!).filter((name) => name.startsWith(network.namespacePrefix));
}

/** Pids of the processes in a namespace (`ip netns pids`). */
export async function namespacePids(namespace: string): Promise<number[]> {
  const { stdout } = await run('ip', ['netns', 'pids', namespace]).catch(() => ({ stdout: '' }));
  return stdout.split('\n').map(Number).filter((pid) => Number.isInteger(pid) && pid > 0);
}

export async function makeNetwork(network: ClusterNetwork, gates: readonly GateHost[]): Promise<void> {
  await ip('link', 'add', network.bridge, 'type', 'bridge');
  await ip('addr', 'add', `${network.hostAddress}/24`, 'dev', network.bridge);
  await ip('link', 'set', network.bridge, 'up');
  for (const gate of gates) {
    await ip('netns', 'add', gate.namespace);
    await ip('link', 'add', gate.hostLink, 'type', 'veth', 'peer', 'name', gate.nsLink);
    await ip('link', 'set', gate.hostLink, 'master', network.bridge);
    await ip('link', 'set', gate.hostLink, 'up');
    await ip('link', 'set', gate.nsLink, 'netns', gate.namespace);
    await ip('netns', 'exec', gate.namespace, 'ip', 'addr', 'add', `${gate.address}/24`, 'dev', gate.nsLink);
    await ip('netns', 'exec', gate.namespace, 'ip', 'link', 'set', gate.nsLink, 'up');
    await ip('netns', 'exec', gate.namespace, 'ip', 'link', 'set', 'lo', 'up');
  }
}

/** Takes a gate's link down or up (`ip link set … down`): the host is cut off from the cluster and back. */
export async function setGateLink(gate: GateHost, up: boolean): Promise<void> {
  await ip('link', 'set', gate.hostLink, up ? 'up' : 'down');
}

/** Removes every namespace of the cluster and the bridge; what is already gone is skipped. */
export async function removeNetwork(network: ClusterNetwork): Promise<void> {
  for (const namespace of await clusterNamespaces(network)) {
    await quietly(['link', 'del', hostLinkName(network, Number(namespace.slice(network.namespacePrefix.length)))]);
    await quietly(['netns', 'del', namespace]);
  }
  await quietly(['link', 'del', network.bridge]);
}
