import { z } from 'zod';

/** How a worker gate confines its agents (docs/security.md#security-model), as its start log, /control/health and /dashboard/api report it. */
export const AGENT_ISOLATION_MODES = ['isolated', 'sandboxed', 'user_only', 'unsandboxed'] as const;

export const AgentIsolationSchema = z.object({
  mode: z
    .enum(AGENT_ISOLATION_MODES)
    .describe(
      "isolated: bwrap and a user of the agent's own; sandboxed: bwrap, as the gate's user; user_only: another user without bwrap; unsandboxed: neither",
    ),
  sandboxed: z.boolean().describe('Agents start in a bwrap mount namespace that shows only their project, home, tools and the read-only system'),
  agent_user: z.string().describe('The configured agent_user'),
  runs_as: z.string().describe("The user agents run as: agent_user when the gate can switch to it, else the gate's own"),
  user_switch: z.object({ ok: z.boolean(), uid: z.number().int().nullable(), gid: z.number().int().nullable(), detail: z.string() }),
  bwrap: z.object({ ok: z.boolean(), path: z.string().nullable(), version: z.string().nullable(), detail: z.string() }),
  summary: z.string().describe('One sentence: what an agent can see and who it runs as'),
});
export type AgentIsolation = z.output<typeof AgentIsolationSchema>;
