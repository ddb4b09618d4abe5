import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:net';
import { inject } from 'vitest';
import type { ClusterPorts } from '../../scripts/cluster/topology.ts';

/**
 * Ports for the servers that tests start (docs/testing.md#tests, ports).
 *
 * A port found free by binding port 0 and closing again goes back to the kernel, which may hand it to any other
 * process before its server binds it, or after that server is killed and before it is restarted on the same port (a
 * control plane after SIGKILL, a callback receiver taken down and up). Another test file's gate then answers on the
 * control plane's address. So each test run owns a block of ports below the kernel's ephemeral range, which neither a
 * bind to port 0 nor an outgoing connection ever draws from, and each vitest worker owns a slot of that block: a port
 * handed out here is never handed to another file running at the same time, and stays the test's across restarts.
 * Within a slot the files that run one after another go on where the last one stopped (the slot's next port is kept
 * in a file of the run), so a port is handed out again only after the whole slot was, long after its file ended.
 */
export const PORT_SLOT_SIZE = 250;
/** Slot 0 is the run's main process (global setup); workers are slots 1..MAX_WORKERS. */
export const MAX_TEST_WORKERS = 16;
const RUN_BLOCK_SIZE = PORT_SLOT_SIZE * (MAX_TEST_WORKERS + 1);
const FIRST_PORT = 10_000;

function ephemeralRangeStart(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return Number.isInteger(low) ? low! : 32_768;
  } catch {
    return 32_768;
  }
}

/** How many runs' blocks fit below the ephemeral range: that many test runs can share one machine. */
function runBlocks(): number {
  const blocks = Math.floor((ephemeralRangeStart() - FIRST_PORT) / RUN_BLOCK_SIZE);
  if (blocks < 1) {
    throw new Error(
      `the kernel's ephemeral port range starts at ${ephemeralRangeStart()}, leaving no room below it for test ports from ${FIRST_PORT}; ` +
        'raise it (sysctl net.ipv4.ip_local_port_range="32768 60999")',
    );
  }
  return blocks;
}

function listen(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => resolve(server));
  });
}

/**
 * Claims a run's block for as long as the returned server stays open: its first port is held as a sentinel, so a
 * second test run on the same machine takes the next block. Called once, by global setup.
 */
export async function claimPortBlock(): Promise<{ block: number; nextPortFiles: string; release: () => Promise<void> }> {
  const blocks = runBlocks();
  for (let block = 0; block < blocks; block++) {
    const sentinel = await listen(FIRST_PORT + block * RUN_BLOCK_SIZE);
    if (!sentinel) continue;
    const nextPortFiles = mkdtempSync(join(tmpdir(), 'rcp-test-ports-'));
    const release = async () => {
      rmSync(nextPortFiles, { recursive: true, force: true });
      await new Promise<void>((resolve) => sentinel.close(() => resolve()));
    };
    return { block, nextPortFiles, release };
  }
  throw new Error(`all ${blocks} blocks of test ports are held: that many test runs are going on this machine at once`);
}

function workerSlot(): number {
  const slot = Number(process.env.VITEST_POOL_ID ?? 0);
  if (!Number.isInteger(slot) || slot < 0 || slot > MAX_TEST_WORKERS) {
    throw new Error(`VITEST_POOL_ID ${process.env.VITEST_POOL_ID} is outside 0..${MAX_TEST_WORKERS}: set RCP_TEST_WORKERS to at most ${MAX_TEST_WORKERS}`);
  }
  return slot;
}

/** Where this slot's next port is kept: one file per slot, used by one test file at a time. */
const nextPortFile = () => join(inject('portNextFiles'), `slot-${workerSlot()}`);

let handedOut: number | undefined;

function nextOffset(): number {
  if (handedOut === undefined) {
    try {
      handedOut = Number(readFileSync(nextPortFile(), 'utf8')) || 0;
    } catch {
      handedOut = 0;
    }
  }
  const offset = handedOut % (PORT_SLOT_SIZE - 1);
  handedOut += 1;
  writeFileSync(nextPortFile(), String(handedOut));
  return offset;
}

/**
 * A port of this worker's slot that nothing listens on now and that no other worker will be handed. Each slot's first
 * port is skipped: slot 0's is the block's sentinel.
 */
export async function testPort(): Promise<number> {
  const slotStart = FIRST_PORT + inject('portBlock') * RUN_BLOCK_SIZE + workerSlot() * PORT_SLOT_SIZE;
  for (let tried = 0; tried < PORT_SLOT_SIZE - 1; tried++) {
    const port = slotStart + 1 + nextOffset();
    // A server a finished file left behind may still hold a port of this slot.
    const probe = await listen(port);
    if (!probe) continue;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    return port;
  }
  throw new Error(`every one of the ${PORT_SLOT_SIZE - 1} ports of this slot is in use`);
}

/** Every port a local cluster (scripts/cluster) listens on, from the test's own block. */
export async function clusterTestPorts(): Promise<ClusterPorts> {
  const next = () => testPort();
  return {
    temporal: { frontend: await next(), frontendHttp: await next(), history: await next(), matching: await next(), worker: await next(), metrics: await next() },
    membership: { frontend: await next(), history: await next(), matching: await next(), worker: await next() },
    replicas: [await next(), await next()],
  };
}
