import { realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { isStrictlyInside, reachableInside } from '../platform/files/pinned-dir.ts';

export { isInsideOrSame, isStrictlyInside } from '../platform/files/pinned-dir.ts';

/** project_root as the gate resolves it (symbolic links followed), the base every check compares with. */
export function resolvedRoot(projectRoot: string): string {
  try {
    return realpathSync(resolve(projectRoot));
  } catch {
    return resolve(projectRoot);
  }
}

export interface ResolvedProjectPaths {
  projectDir: string;
  promptFile: string;
}

export type ProjectPathResult = { ok: true; paths: ResolvedProjectPaths } | { ok: false; reason: string };

/**
 * Resolves a project's directory (absolute, or relative to the project root) and prompt file (absolute, or
 * relative to the project directory). Both must stay inside the project root, also after following symlinks.
 */
export function resolveProjectPaths(projectRoot: string, projectDir: string, promptFile: string): ProjectPathResult {
  const root = resolvedRoot(projectRoot);
  const dir = resolve(root, projectDir);
  if (!isStrictlyInside(root, dir)) return { ok: false, reason: `project_dir escapes project_root (${root})` };
  const prompt = resolve(dir, promptFile);
  if (!isStrictlyInside(root, prompt)) return { ok: false, reason: `prompt_file escapes project_root (${root})` };
  if (prompt === dir) return { ok: false, reason: 'prompt_file must name a file inside project_dir' };
  if (!isStrictlyInside(root, dirname(prompt))) return { ok: false, reason: 'prompt_file must lie inside a directory below project_root' };
  if (!reachableInside(root, dir)) return { ok: false, reason: 'project_dir escapes project_root through a symbolic link' };
  if (!reachableInside(root, dirname(prompt))) return { ok: false, reason: 'prompt_file escapes project_root through a symbolic link' };
  return { ok: true, paths: { projectDir: dir, promptFile: prompt } };
}
