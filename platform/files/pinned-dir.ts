import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  mkdirSync,
  openSync,
  opendirSync,
  read,
  readlinkSync,
  readSync,
  realpathSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { promisify } from 'node:util';

/**
 * Files an agent can touch, opened once and then used only through their descriptors (docs/security.md#security-model).
 * A directory is pinned by opening it; everything below it is reached through `/proc/self/fd/<fd>/<name>`, one
 * path component at a time, so no path is walked twice and a link or directory swapped in between a check and a use
 * changes nothing: the check is made on the handle that is then used. Files are opened with O_NOFOLLOW and must be
 * regular files with exactly one link; every handle's real path must stay inside the boundary the caller pinned.
 * Linux only (the service runs there): `/proc/self/fd` is what pins a directory.
 */

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

/** Why a path was refused: an agent's doing, so callers answer 4xx or count the file as absent. */
export type UnsafeReason = 'escapes' | 'bad_name' | 'not_regular' | 'linked' | 'too_large';

export class UnsafePathError extends Error {
  readonly reason: UnsafeReason;

  constructor(reason: UnsafeReason, message: string) {
    super(message);
    this.name = 'UnsafePathError';
    this.reason = reason;
  }
}

/** True when `child` is `parent` itself or lies below it (path-segment aware). */
export function isInsideOrSame(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

export const isStrictlyInside = (parent: string, child: string) => child !== parent && isInsideOrSame(parent, child);

/** Control characters (newlines included) make a name that forges lines in logs, sums and Markdown. */
export const hasControlChars = (name: string) => /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(name);

const fdPath = (fd: number, name?: string) => (name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`);

/** The path components of `rel`, each a plain name: '.' segments dropped, '..' and an absolute path refused. */
export function components(rel: string): string[] {
  if (isAbsolute(rel)) throw new UnsafePathError('bad_name', `${JSON.stringify(rel)} must be relative`);
  const parts = rel.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.some((part) => part === '..' || part.includes('\u0000'))) throw new UnsafePathError('bad_name', `${JSON.stringify(rel)} holds '..' or NUL`);
  return parts;
}

const isErrno = (error: unknown, ...codes: string[]) => codes.includes((error as NodeJS.ErrnoException).code ?? '');

/** A regular file held open and checked: what fstat said when it was opened. */
export interface PinnedFile {
  fd: number;
  size: number;
}

const readAt = promisify(read);
const CHUNK_BYTES = 64 * 1024;

/**
 * A directory held open. `boundary` is the real path every handle opened through it must stay strictly inside (or be,
 * for the boundary directory itself).
 */
export class PinnedDir {
  private closed = false;
  readonly fd: number;
  /** The real path of the directory when it was opened (for messages and comparisons; never opened again). */
  readonly path: string;
  readonly boundary: string;

  private constructor(fd: number, path: string, boundary: string) {
    this.fd = fd;
    this.path = path;
    this.boundary = boundary;
  }

  /**
   * Opens `<base>/<rel>` (base is a directory the service names itself, e.g. project_root), creating missing
   * directories when asked. Links on the way are followed only where the directory they reach is still inside base's
   * real path; the result is strictly inside it (or base itself, with `allowBase`). With `selfBoundary`, what is opened below the result must stay inside
   * the result itself (a project's files inside that project).
   */
  static open(base: string, rel: string, options: { create?: boolean; mode?: number; selfBoundary?: boolean; allowBase?: boolean } = {}): PinnedDir {
    if (options.create) mkdirSync(base, { recursive: true, mode: options.mode ?? 0o755 });
    const real = realpathSync(resolve(base));
    const root = new PinnedDir(openSync(real, O_RDONLY | O_DIRECTORY), real, real);
    try {
      const dir = root.openDir(rel, options);
      if (dir.path === real && !options.allowBase) {
        dir.close();
        throw new UnsafePathError('escapes', `${JSON.stringify(rel)} names ${real} itself, not a directory inside it`);
      }
      return options.selfBoundary ? dir.withBoundary(dir.path) : dir;
    } finally {
      root.close();
    }
  }

  /**
   * The process's current directory, held open and its own boundary: a dispatch script starts in its project pinned
   * by the gate, so this is that directory whatever its path names by now.
   */
  static current(): PinnedDir {
    const fd = openSync('.', O_RDONLY | O_DIRECTORY);
    try {
      const real = readlinkSync(fdPath(fd));
      return new PinnedDir(fd, real, real);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
  }

  private withBoundary(boundary: string): PinnedDir {
    if (!isInsideOrSame(this.boundary, boundary)) throw new UnsafePathError('escapes', `${boundary} is outside ${this.boundary}`);
    return new PinnedDir(this.fd, this.path, boundary);
  }

  private realOf(fd: number): string {
    return readlinkSync(fdPath(fd));
  }

  /** Opens the directory `rel` below this one, component by component; the caller closes what it gets. */
  openDir(rel: string, options: { create?: boolean; mode?: number } = {}): PinnedDir {
    let current: PinnedDir | null = null;
    let walked = '';
    try {
      for (const part of components(rel)) {
        const parentFd: number = current?.fd ?? this.fd;
        walked = walked ? `${walked}/${part}` : part;
        if (options.create) {
          try {
            // mkdir never follows a link at the name it creates: a planted link makes this EEXIST, nothing more.
            mkdirSync(fdPath(parentFd, part), { mode: options.mode ?? 0o755 });
          } catch (error) {
            if (!isErrno(error, 'EEXIST')) throw error;
          }
        }
        const fd = openSync(fdPath(parentFd, part), O_RDONLY | O_DIRECTORY);
        const real = this.realOf(fd);
        current?.close();
        current = new PinnedDir(fd, real, this.boundary);
        if (!isInsideOrSame(this.boundary, real)) {
          throw new UnsafePathError('escapes', `${walked} escapes ${this.boundary} through a symbolic link`);
        }
      }
      return current ?? new PinnedDir(openSync(fdPath(this.fd), O_RDONLY | O_DIRECTORY), this.path, this.boundary);
    } catch (error) {
      current?.close();
      throw error;
    }
  }

  /**
   * Opens the regular file `rel` below this directory for reading, without following a link at its name: it must have
   * exactly one link (a hard link to a file elsewhere is refused) and at most `maxBytes`.
   */
  openFile(rel: string, maxBytes: number): PinnedFile {
    const parts = components(rel);
    const name = parts.pop();
    if (name === undefined) throw new UnsafePathError('bad_name', `${JSON.stringify(rel)} names no file`);
    const dir = parts.length > 0 ? this.openDir(parts.join('/')) : null;
    try {
      // O_NONBLOCK: a FIFO planted under the name must not hang the open; fstat refuses it next.
      const fd = openSync(fdPath(dir?.fd ?? this.fd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
      try {
        const info = fstatSync(fd);
        if (!info.isFile()) throw new UnsafePathError('not_regular', `${rel} is not a regular file`);
        if (info.nlink !== 1) throw new UnsafePathError('linked', `${rel} has ${info.nlink} links (a hard link is not evidence)`);
        if (info.size > maxBytes) throw new UnsafePathError('too_large', `${rel} has ${info.size} bytes (at most ${maxBytes})`);
        if (!isStrictlyInside(this.boundary, this.realOf(fd))) throw new UnsafePathError('escapes', `${rel} is outside ${this.boundary}`);
        return { fd, size: info.size };
      } catch (error) {
        closeSync(fd);
        throw error;
      }
    } catch (error) {
      if (isErrno(error, 'ELOOP')) throw new UnsafePathError('escapes', `${rel} is a symbolic link`);
      throw error;
    } finally {
      dir?.close();
    }
  }

  /** The file's bytes, or null when it does not exist; refused as openFile refuses. */
  readFileIfExists(rel: string, maxBytes: number): Buffer | null {
    let file: PinnedFile;
    try {
      file = this.openFile(rel, maxBytes);
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return null;
      throw error;
    }
    try {
      const bytes = Buffer.alloc(file.size);
      let at = 0;
      while (at < file.size) {
        const got = readSync(file.fd, bytes, at, file.size - at, at);
        if (got === 0) break;
        at += got;
      }
      return bytes.subarray(0, at);
    } finally {
      closeSync(file.fd);
    }
  }

  /** Closes a file opened by openFile without reading it. */
  static release(file: PinnedFile): void {
    closeSync(file.fd);
  }

  /**
   * Streams a file opened by openFile to `onChunk` and closes it. Reads at most the size fstat gave when it was opened
   * (a file growing meanwhile gives no more), and no more than `maxBytes` of it, so a caller's budget holds.
   */
  static async streamFile(file: PinnedFile, onChunk: (chunk: Buffer) => void, maxBytes = file.size): Promise<void> {
    const end = Math.min(file.size, maxBytes);
    try {
      const buffer = Buffer.alloc(Math.min(CHUNK_BYTES, Math.max(1, end)));
      let at = 0;
      while (at < end) {
        const { bytesRead } = await readAt(file.fd, buffer, 0, Math.min(buffer.length, end - at), at);
        if (bytesRead === 0) break;
        onChunk(Buffer.from(buffer.subarray(0, bytesRead)));
        at += bytesRead;
      }
    } finally {
      closeSync(file.fd);
    }
  }

  /**
   * Up to `limit` entries of this directory, sorted by name; `truncated` when there were more. Reads entry by entry,
   * so a directory of a million names costs no more than `limit` of them.
   */
  entries(limit: number): { entries: { name: string; kind: 'dir' | 'file' | 'other' }[]; truncated: boolean } {
    const dir = opendirSync(fdPath(this.fd));
    const found: { name: string; kind: 'dir' | 'file' | 'other' }[] = [];
    let truncated = false;
    try {
      for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
        if (found.length >= limit) {
          truncated = true;
          break;
        }
        found.push({ name: entry.name, kind: entry.isDirectory() ? 'dir' : entry.isFile() ? 'file' : 'other' });
      }
    } finally {
      dir.closeSync();
    }
    return { entries: found.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)), truncated };
  }

  /**
   * Writes `name` in this directory whole or not at all: a new temporary file (O_EXCL, no link followed), then a
   * rename inside the pinned directory, which replaces the name itself and never writes through a link planted there.
   */
  writeFileAtomic(name: string, data: string | Buffer, mode = 0o644): void {
    const parts = components(name);
    if (parts.length !== 1) throw new UnsafePathError('bad_name', `${JSON.stringify(name)} is not a plain file name`);
    const temporary = `.${parts[0]}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    const fd = openSync(fdPath(this.fd, temporary), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
    try {
      try {
        const bytes = typeof data === 'string' ? Buffer.from(data) : data;
        for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(fdPath(this.fd, temporary), fdPath(this.fd, parts[0]!));
    } catch (error) {
      try {
        unlinkSync(fdPath(this.fd, temporary));
      } catch {
        // Renamed already, or never created.
      }
      throw error;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
  }
}

/**
 * Whether the deepest existing directory of `path` (absolute, strictly inside `root`, a real path) opens with its real
 * path inside `root`: a quick refusal before work starts. What is then written goes through a pinned directory.
 */
export function reachableInside(root: string, path: string): boolean {
  for (let dir = path; isStrictlyInside(root, dir); dir = dirname(dir)) {
    try {
      PinnedDir.open(root, relative(root, dir)).close();
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return false;
    }
  }
  return isStrictlyInside(root, path);
}
