import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { LaunchedRuntime } from '../../domain/agent-runtimes.ts';

interface PinnedAgent {
  package: string;
  version: string;
  bin: string;
}

/** The versions scripts/ensure-agents.sh installs: one file, read by the script and by the gate. */
const PINNED: Record<LaunchedRuntime, PinnedAgent> = JSON.parse(readFileSync(new URL('./agent-versions.json', import.meta.url), 'utf8'));

export const pinnedAgent = (runtime: LaunchedRuntime): PinnedAgent => PINNED[runtime];

/** Where scripts/ensure-agents.sh puts the pinned tool's executable: the per-user cache, never node_modules. */
export function pinnedAgentBinary(runtime: LaunchedRuntime, env: NodeJS.ProcessEnv = process.env): string {
  const agent = PINNED[runtime];
  const cache = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(cache, 'research-control-plane', 'agents', `${runtime}-${agent.version}`, 'node_modules', '.bin', agent.bin);
}
