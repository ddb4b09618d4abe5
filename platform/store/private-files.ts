import { chmodSync, lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Creates `dir` if needed and makes it, and with `recursive` everything below it, private to the service's user:
 * directories 0700, files 0600. Symbolic links are left alone (chmod would follow them out of the tree). Run at
 * every start, so files left readable by an earlier version, or by a library that ignores the umask, are fixed too.
 */
export function makePrivate(dir: string, options: { recursive: boolean }): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pending = [dir];
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) continue;
    const wanted = stat.isDirectory() ? 0o700 : 0o600;
    if ((stat.mode & 0o777) !== wanted) chmodSync(path, wanted);
    if (options.recursive && stat.isDirectory()) for (const name of readdirSync(path)) pending.push(join(path, name));
  }
}

