/**
 * The agent's sandbox and user (docs/security.md#security-model). The gate detects at start what it can do
 * (capabilities.ts), and for each run makes a plan (plan.ts): the user the agent runs as, the bwrap sandbox it starts
 * in and what that shows. `sandboxArgvPrefix` turns a plan into `[setpriv …] [bwrap … --]`, the part of a run's first
 * argv after the cgroup join.
 *
 * The script runtime: the gate runs the operator's dispatch script wholly inside the prefix.
 * The real tools (launchers): the launcher runs as the gate's user outside the sandbox; the gate hands it its run's
 * plan as JSON in AGENT_SANDBOX_PLAN, and the launcher starts the tool with
 * `[...sandboxArgvPrefix(agentSandboxPlanFromEnv(process.env), { readOnly, readWrite, pidNamespace: true }), tool, ...args]`
 * and the environment `agentEnvironment` gives. Every path a plan binds must be reachable by the agent user by path
 * (bwrap runs as that user): `agentOwnedDir` makes a directory the agent user's own and opens the way to it.
 */
export { AgentSandbox, gateConfigFiles, scriptDirOf } from './agent-sandbox.ts';
export { agentHomeFor, agentOwnedDir, grantProject } from './agent-dirs.ts';
export { canSwitchUsers, detectIsolation, findOnPath, lookUpUser, type AgentUser, type IsolationCapabilities } from './capabilities.ts';
export { AGENT_ENV_ALLOW_LIST, RUN_CONTRACT_ENV, agentEnvironment } from './environment.ts';
export { AGENT_SANDBOX_PLAN_ENV, AgentSandboxPlanSchema, agentSandboxPlanFromEnv, type AgentSandboxPlan } from './plan.ts';
export { bwrapArgs, sandboxArgvPrefix, type SandboxExtras } from './sandbox-argv.ts';
