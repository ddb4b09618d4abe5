import { link, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PinnedDir, reachableInside, UnsafePathError } from '../../platform/files/pinned-dir.ts';

/** The descriptor-based file primitives every reader and writer of agent files uses (docs/security.md#security-model). */

let root: string;
let outside: string;

beforeAll(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'rcp-pinned-'));
  root = join(dir, 'root');
  outside = join(dir, 'outside');
  await mkdir(join(root, 'p', 'sub'), { recursive: true });
  await mkdir(outside);
  await writeFile(join(outside, 'secret'), 'secret');
  await writeFile(join(root, 'p', 'ok.txt'), 'ok');
  await writeFile(join(root, 'p', 'sub', 'deep.txt'), 'deep');
  await symlink(join(outside, 'secret'), join(root, 'p', 'link.txt'));
  await link(join(outside, 'secret'), join(root, 'p', 'hard.txt'));
  await symlink(outside, join(root, 'p', 'away'));
  await symlink(join(root, 'p', 'sub'), join(root, 'p', 'inside'));
  await symlink(outside, join(root, 'linked-project'));
  execFileSync('mkfifo', [join(root, 'p', 'fifo')]);
});

afterAll(() => rm(join(root, '..'), { recursive: true, force: true }));

const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    return error instanceof UnsafePathError ? error.reason : (error as NodeJS.ErrnoException).code;
  }
  return 'not refused';
};

describe('PinnedDir', () => {
  it('reads regular files through the pinned directory, links inside it included', () => {
    const p = PinnedDir.open(root, 'p', { selfBoundary: true });
    try {
      expect(p.readFileIfExists('ok.txt', 100)?.toString()).toBe('ok');
      expect(p.readFileIfExists('inside/deep.txt', 100)?.toString()).toBe('deep');
      expect(p.readFileIfExists('absent.txt', 100)).toBeNull();
    } finally {
      p.close();
    }
  });

  it('refuses a link, a hard link, a FIFO, a file over its size, a directory leading out, and ..', () => {
    const p = PinnedDir.open(root, 'p', { selfBoundary: true });
    try {
      expect(refusal(() => p.readFileIfExists('link.txt', 100))).toBe('escapes');
      expect(refusal(() => p.readFileIfExists('hard.txt', 100))).toBe('linked');
      expect(refusal(() => p.readFileIfExists('fifo', 100))).toBe('not_regular');
      expect(refusal(() => p.readFileIfExists('ok.txt', 1))).toBe('too_large');
      expect(refusal(() => p.readFileIfExists('away/secret', 100))).toBe('escapes');
      expect(refusal(() => p.readFileIfExists('../p/ok.txt', 100))).toBe('bad_name');
    } finally {
      p.close();
    }
  });

  it('refuses a project directory whose real path is outside the root, or the root itself', () => {
    expect(refusal(() => PinnedDir.open(root, 'linked-project'))).toBe('escapes');
    expect(refusal(() => PinnedDir.open(root, '.'))).toBe('escapes');
    expect(reachableInside(root, join(root, 'linked-project', 'x'))).toBe(false);
    expect(reachableInside(root, join(root, 'new', 'x'))).toBe(true);
  });

  it('creates directories and writes atomically without following a link at the name', async () => {
    const made = PinnedDir.open(root, 'made/deeper', { create: true });
    try {
      made.writeFileAtomic('a.txt', 'one');
      made.writeFileAtomic('a.txt', 'two');
      expect(await readFile(join(root, 'made', 'deeper', 'a.txt'), 'utf8')).toBe('two');
      expect(await readdir(join(root, 'made', 'deeper'))).toEqual(['a.txt']);
    } finally {
      made.close();
    }
    const p = PinnedDir.open(root, 'p');
    try {
      p.writeFileAtomic('link.txt', 'replaced');
      expect(await readFile(join(outside, 'secret'), 'utf8')).toBe('secret');
      expect(refusal(() => p.openDir('away/new', { create: true }))).toBe('escapes');
      expect(await readdir(outside)).toEqual(['secret']);
    } finally {
      p.close();
    }
  });

  it('lists at most the entries asked for, sorted, and says when there were more', () => {
    const p = PinnedDir.open(root, 'p');
    try {
      const all = p.entries(100);
      expect(all.truncated).toBe(false);
      expect(all.entries.map((entry) => entry.name)).toEqual([...all.entries.map((entry) => entry.name)].sort());
      expect(p.entries(2)).toMatchObject({ truncated: true, entries: [expect.anything(), expect.anything()] });
    } finally {
      p.close();
    }
  });
});
