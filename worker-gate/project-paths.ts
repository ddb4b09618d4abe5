import { lstatSync, realpathSync } from 'node:fs';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';

/** True when `child` is `parent` itself or lies below it (path-segment aware). */
export function isInsideOrSame(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

export function isStrictlyInside(parent: string, child: string): boolean {
  return child !== parent && isInsideOrSame(parent, child);
}

const lexists = (path: string) => {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
};

// Symlinks are resolved on the part of the path that exists, so a link inside project_root that points
// elsewhere cannot be used to escape it. A link that points nowhere cannot be resolved at all: undefined.
function realpathOfExistingPrefix(path: string): string | undefined {
  let existing = path;
  const rest: string[] = [];
  while (!lexists(existing)) {
    const parent = dirname(existing);
    if (parent === existing) break;
    rest.unshift(existing.slice(parent.length).replace(/^[/\\]/, ''));
    existing = parent;
  }
  try {
    return resolve(realpathSync(existing), ...rest);
  } catch {
    return undefined;
  }
}

/**
 * Whether `path` (absolute) stays inside `root` (already resolved) once every symbolic link on the part of it that
 * exists is followed: a link such as `.research -> /elsewhere` planted in a project must not carry a write out.
 */
export function staysInsideRoot(root: string, path: string): boolean {
  const real = realpathOfExistingPrefix(path);
  return real !== undefined && isStrictlyInside(root, real);
}

/** project_root as the gate resolves it (symbolic links followed), the base every check above compares with. */
export const resolvedRoot = (projectRoot: string) => realpathOfExistingPrefix(resolve(projectRoot)) ?? resolve(projectRoot);

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
  if (!staysInsideRoot(root, dir)) {
    return { ok: false, reason: 'project_dir escapes project_root through a symbolic link' };
  }
  if (!staysInsideRoot(root, prompt)) {
    return { ok: false, reason: 'prompt_file escapes project_root through a symbolic link' };
  }
  return { ok: true, paths: { projectDir: dir, promptFile: prompt } };
}
