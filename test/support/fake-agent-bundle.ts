import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

/**
 * The fake agent runs twice per dispatch (launcher, then detached agent), about a hundred times a suite. Loaded
 * through tsx each start cost about a second of CPU on Node 20; bundled into one plain module it costs a tenth of
 * that. The global setup builds it once per test run, and fake-agent.sh runs the bundle.
 */
export const FAKE_AGENT_SOURCE = fileURLToPath(new URL('../fixtures/agents/fake-agent.ts', import.meta.url));
export const FAKE_AGENT_BUNDLE = fileURLToPath(new URL('../fixtures/agents/dist/fake-agent.mjs', import.meta.url));

export async function buildFakeAgentBundle(): Promise<void> {
  await build({
    entryPoints: [FAKE_AGENT_SOURCE],
    outfile: FAKE_AGENT_BUNDLE,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'warning',
  });
}
