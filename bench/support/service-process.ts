import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchDatabaseUrl } from '../support.ts';

/** The service as benches start it: `npm start`'s own command line and the pieces of a control plane alone on `pg`. */

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** `npm start`'s own command line (its Node flags matter here), with paths that work from another directory. */
export const START_ARGS = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start
  .split(/\s+/)
  .slice(1)
  .map((arg) => (/\.[jt]s$/.test(arg) ? join(REPO_ROOT, arg) : arg));

/** VmRSS of a process in KiB, 0 once it is gone. */
export function rssKib(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(match?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** Writes, into `dir`, the config of a control plane alone on the `pg` backend's `database`; answers its path. */
export function writePgControlPlaneConfig(dir: string, options: { database: string; token: string; callbackToken: string }): string {
  const configPath = join(dir, 'config.json');
  writeFileSync(
    configPath,
    JSON.stringify({
      roles: ['control_plane'],
      control_api_bearer_token: options.token,
      completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
      completion_callback_token: options.callbackToken,
      state_dir: './state',
      project_root: './projects',
      dispatch_script_path: './agent.sh',
      listen_host: '127.0.0.1',
      listen_port: 0,
      control_plane_store_backend: 'pg',
      pg_database_url: benchDatabaseUrl(options.database),
    }),
    { mode: 0o600 },
  );
  return configPath;
}

/** The API URL the service's start-up banner prints, once it has. */
export async function waitForBanner(child: ChildProcess, output: () => string): Promise<string> {
  const deadline = Date.now() + 600_000;
  while (Date.now() < deadline) {
    const match = /API:\s+(http:\/\/[^/\s]+)/.exec(output());
    if (match) return match[1]!;
    if (child.exitCode !== null) throw new Error(`the service exited early:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the service did not start:\n${output()}`);
}
