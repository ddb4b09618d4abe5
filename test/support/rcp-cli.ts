import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RCP = fileURLToPath(new URL('../../bin/rcp.js', import.meta.url));

/**
 * One `rcp` process against a control plane, found through RCP_URL and RCP_TOKEN, with a home of its own (no profile)
 * and no colour; stdout as bytes, for commands that write a file's bytes.
 */
const rcpEnv = (home: string, control: { url: string; token: string }) => ({ PATH: process.env.PATH ?? '', HOME: home, XDG_CONFIG_HOME: home, RCP_URL: control.url, RCP_TOKEN: control.token, NO_COLOR: '1' });

/** An `rcp` process that goes on (`rcp runs logs --follow`), for the test to read as it prints; its home is the system's temporary directory. */
export function startRcp(args: string[], control: { url: string; token: string }): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, [RCP, ...args], { env: rcpEnv(tmpdir(), control), stdio: 'pipe' });
}

export async function rcpCli(args: string[], control: { url: string; token: string }): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  const home = await mkdtemp(join(tmpdir(), 'rcp-cli-home-'));
  try {
    const child = spawn(process.execPath, [RCP, ...args], { env: rcpEnv(home, control), stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    return { code, stdout: Buffer.concat(out), stderr };
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}
