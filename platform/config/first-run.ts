import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The bundled agent that first-run configs dispatch to (located from this module, not from cwd). */
export const SIMULATED_AGENT_PATH = fileURLToPath(new URL('../../worker-gate/simulated-agent.sh', import.meta.url));

export function firstRunConfigPath(cwd: string): string {
  return join(cwd, 'state', 'config.json');
}

function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * A single-machine config: loopback only, both roles, embedded store and Temporal, live dispatch off. It names no
 * callback or gate URL: both are this process's own address, so listen_port alone moves the service.
 */
export function firstRunConfig(): Record<string, unknown> {
  return {
    control_api_bearer_token: randomToken(),
    completion_callback_token: randomToken(),
    worker_wake_gate_bearer_token: randomToken(),
    listen_host: '127.0.0.1',
    listen_port: 8787,
    // Host names a browser may reach this loopback service by; addresses always pass. Keeps DNS rebinding out.
    allowed_hosts: ['localhost'],
    roles: ['control_plane', 'worker_gate'],
    state_dir: '.',
    project_root: './projects',
    control_plane_store_backend: 'embedded',
    temporal_address: '',
    live_dispatch_enabled: false,
    dispatch_script_path: SIMULATED_AGENT_PATH,
  };
}

/**
 * Writes `<cwd>/state/config.json` (mode 0600) and returns its control API token so the
 * caller can print it once. Returns null, writing nothing, when the file already exists.
 */
export function writeFirstRunConfig(cwd: string): { configPath: string; token: string } | null {
  const configPath = firstRunConfigPath(cwd);
  const config = firstRunConfig();
  mkdirSync(dirname(configPath), { recursive: true, mode: 0o700 });
  try {
    // 'wx' fails if the file exists, so a concurrent or earlier run is never overwritten.
    writeFileSync(configPath, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return null;
    throw error;
  }
  return { configPath, token: config.control_api_bearer_token as string };
}
