import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';

const jsonText = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

function writeTempFile(path: string, text: string, mode = 0o600): string {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  // A fresh name, created exclusively: never a file (or link) someone put there first.
  const fd = openSync(temp, 'wx', mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return temp;
}

/** Replaces `path` with `text` so that a reader (or a crash) sees the old or the new file, never half of one. */
export function writeTextAtomic(path: string, text: string, mode = 0o600): void {
  renameSync(writeTempFile(path, text, mode), path);
}

export function writeJsonAtomic(path: string, value: unknown): void {
  writeTextAtomic(path, jsonText(value));
}

/** Creates `path` only if it does not exist yet, atomically. Returns false, writing nothing, when it exists. */
export function createJsonExclusive(path: string, value: unknown): boolean {
  const temp = writeTempFile(path, jsonText(value));
  try {
    linkSync(temp, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    unlinkSync(temp);
  }
}

/** Parsed JSON of every `*.json` file in `dir`; unreadable or torn files are reported, not thrown. */
export function readJsonDir(dir: string, onBadFile: (file: string, error: Error) => void): { file: string; value: unknown }[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const out: { file: string; value: unknown }[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    const file = join(dir, name);
    try {
      out.push({ file, value: JSON.parse(readFileSync(file, 'utf8')) });
    } catch (error) {
      onBadFile(file, error as Error);
    }
  }
  return out;
}

/** Safe file name for an identifier chosen by a client. */
export function fileNameFor(id: string): string {
  return `${encodeURIComponent(id)}.json`;
}
