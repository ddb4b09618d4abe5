import { z } from 'zod';

/** The environment variable in which the gate hands a launcher its run's plan (JSON), for the tool it starts. */
export const AGENT_SANDBOX_PLAN_ENV = 'AGENT_SANDBOX_PLAN';

const AbsolutePath = z.string().min(1).max(4096).refine((path) => path.startsWith('/') && !path.includes('\0'), 'must be an absolute path');

/**
 * What the gate decided for one run's agent (docs/security.md#security-model): the user it runs as, the sandbox it starts in and
 * what that sandbox shows. Plain data, so that a launcher (a separate process) builds the same prefix for its tool.
 */
export const AgentSandboxPlanSchema = z.strictObject({
  /** The user the agent runs as; null: the gate's own. */
  user: z.strictObject({ name: z.string().min(1), uid: z.number().int().min(1), gid: z.number().int().min(0) }).nullable(),
  setpriv: AbsolutePath.nullable(),
  /** null: no mount namespace; the agent sees what its user may see. */
  bwrap: AbsolutePath.nullable(),
  /** Shown read-write at this path, which the run's contract names; the agent starts there. */
  project_dir: AbsolutePath,
  /** The directory shown there: the project's real path as the gate pinned it, so a link swapped in for project_dir later moves nothing. */
  project_source: AbsolutePath,
  /** The agent's own HOME, shown read-write. */
  home_dir: AbsolutePath,
  /** Tools shown read-only besides the system: the gate's code, Node, the dispatch script's directory, agent_read_only_paths. */
  read_only: z.array(AbsolutePath),
  /** agent_writable_paths. */
  writable: z.array(AbsolutePath),
  /** Files of the gate's paths shown read-only after the masks: the run's prompt when it lies outside the project. */
  shown_files: z.array(AbsolutePath),
  /** The gate's own paths (config files, state_dir, project_root): masked wherever a bound directory holds them. */
  hidden: z.array(AbsolutePath),
  /** bwrap runs as root (no user switch): the agent keeps no capability. */
  drop_capabilities: z.boolean(),
});
export type AgentSandboxPlan = z.output<typeof AgentSandboxPlanSchema>;

/** The plan the gate put in `env` (AGENT_SANDBOX_PLAN); null when there is none. A malformed plan throws: never run unconfined by mistake. */
export function agentSandboxPlanFromEnv(env: NodeJS.ProcessEnv): AgentSandboxPlan | null {
  const text = env[AGENT_SANDBOX_PLAN_ENV];
  if (text === undefined || text === '') return null;
  return AgentSandboxPlanSchema.parse(JSON.parse(text));
}
