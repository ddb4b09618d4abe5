import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { LaunchedRuntime } from '../contract/agent-runtimes.ts';

interface PinnedAgent {
  package: string;
  version: string;
  bin: string;
}

/** The versions scripts/ensure-agents.sh installs: one file, read by the script and by the gate. */
const PINNED: Record<LaunchedRuntime, PinnedAgent> = JSON.parse(readFileSync(new URL('./agent-versions.json', import.meta.url), 'utf8'));

export const pinnedAgent = (runtime: LaunchedRuntime): PinnedAgent => PINNED[runtime];

/**
 * The cache scripts/ensure-agents.sh installs into: the user's own, never node_modules. As root it is the system's
 * (/var/cache): a gate run as root starts the tools as the agent user (docs/security.md#security-model), who cannot pass
 * through root's private home.
 */
export function agentsCacheDir(env: NodeJS.ProcessEnv = process.env, uid = process.getuid?.() ?? -1): string {
  const cache = env.XDG_CACHE_HOME || (uid === 0 ? '/var/cache' : join(env.HOME || homedir(), '.cache'));
  return join(cache, 'research-control-plane', 'agents');
}

/** Where scripts/ensure-agents.sh puts the pinned tool's executable. */
export function pinnedAgentBinary(runtime: LaunchedRuntime, env: NodeJS.ProcessEnv = process.env): string {
  const agent = PINNED[runtime];
  return join(agentsCacheDir(env), `${runtime}-${agent.version}`, 'node_modules', '.bin', agent.bin);
}
