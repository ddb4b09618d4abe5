import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, lstatSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import type { AgentSandboxPlan } from './plan.ts';
import { isWithin, projectKey, realOrResolved } from './sandbox-paths.ts';

/** The agent's own HOME for a project: under state_dir, one per project, never shown to another project's agent. */
export function agentHomeFor(stateDir: string, projectDir: string): string {
  return join(realOrResolved(stateDir), 'agent-sandbox', 'homes', projectKey(projectDir));
}

/**
 * Lets other users pass through `dir` (o+x) without listing it: bwrap runs as the agent user and binds by path, so the
 * way to what the sandbox shows must be open to it. The sandbox itself shows none of these directories' other entries.
 */
function openToPassThrough(dir: string): void {
  const mode = statSync(dir).mode & 0o7777;
  if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o001);
}

/**
 * Creates `dir` (and its parents up to `upTo`, which must hold it) owned by the plan's agent user, mode 0700, and opens
 * the way from `upTo` down to it (o+x only). Without a user switch the directory is the gate's own, 0700.
 */
export function agentOwnedDir(dir: string, upTo: string, plan: Pick<AgentSandboxPlan, 'user'>): void {
  const top = realOrResolved(upTo);
  if (!isWithin(dir, top)) throw new Error(`${dir} is not inside ${top}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory()) throw new Error(`${dir} is not a directory`);
  if (!plan.user) return;
  if (stat.uid !== plan.user.uid || stat.gid !== plan.user.gid) chownSync(dir, plan.user.uid, plan.user.gid);
  chmodSync(dir, 0o700);
  const way = relative(top, dirname(dir));
  let current = top;
  openToPassThrough(current);
  for (const part of way === '' ? [] : way.split('/')) {
    current = join(current, part);
    openToPassThrough(current);
  }
}

/**
 * Hands the project directory to the agent user: it, and everything in it, owned by that user (links themselves, never
 * what they point at: chown -R -P), and project_root open to pass through. The prompt and project.json the gate wrote
 * become the agent's to read.
 */
export function grantProject(stateDir: string, projectRoot: string, projectDir: string, plan: Pick<AgentSandboxPlan, 'user'>): void {
  if (!plan.user) return;
  const root = realOrResolved(projectRoot);
  const state = realOrResolved(stateDir);
  // project_root may lie inside state_dir (the first-run config): the way opens from the outermost of the gate's own.
  const top = isWithin(root, state) ? state : root;
  let current = top;
  openToPassThrough(current);
  for (const part of relative(top, dirname(projectDir)).split('/').filter((name) => name !== '' && name !== '..')) {
    current = join(current, part);
    openToPassThrough(current);
  }
  execFileSync('chown', ['-R', '-P', `${plan.user.uid}:${plan.user.gid}`, '--', projectDir], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });
}
