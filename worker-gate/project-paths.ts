import { existsSync, realpathSync } from 'node:fs';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';

/** True when `child` is `parent` itself or lies below it (path-segment aware). */
export function isInsideOrSame(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

export function isStrictlyInside(parent: string, child: string): boolean {
  return child !== parent && isInsideOrSame(parent, child);
}

// Symlinks are resolved on the part of the path that exists, so a link inside project_root that points
// elsewhere cannot be used to escape it.
function realpathOfExistingPrefix(path: string): string {
  let existing = path;
  const rest: string[] = [];
  while (!existsSync(existing)) {
    const parent = dirname(existing);
    if (parent === existing) break;
    rest.unshift(existing.slice(parent.length).replace(/^[/\\]/, ''));
    existing = parent;
  }
  return resolve(realpathSync(existing), ...rest);
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
  const root = realpathOfExistingPrefix(resolve(projectRoot));
  const dir = resolve(root, projectDir);
  if (!isStrictlyInside(root, dir)) return { ok: false, reason: `project_dir escapes project_root (${root})` };
  const prompt = resolve(dir, promptFile);
  if (!isStrictlyInside(root, prompt)) return { ok: false, reason: `prompt_file escapes project_root (${root})` };
  if (prompt === dir) return { ok: false, reason: 'prompt_file must name a file inside project_dir' };
  if (!isStrictlyInside(root, realpathOfExistingPrefix(dir))) {
    return { ok: false, reason: 'project_dir escapes project_root through a symbolic link' };
  }
  if (!isStrictlyInside(root, realpathOfExistingPrefix(prompt))) {
    return { ok: false, reason: 'prompt_file escapes project_root through a symbolic link' };
  }
  return { ok: true, paths: { projectDir: dir, promptFile: prompt } };
}
