import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { readdirSync, lstatSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../platform/store/open-store.ts';
import { CallbackReceiver, startGateProcess, writeGateConfig } from '../support/gate.ts';

// Issue 32, M4: PGlite wrote 968 of 1,167 files under pgdata 0666, so with a state_dir others could enter, any user
// (the agents' among them) could write the ledgers past their append-only triggers.
const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

/** Every path under `dir` whose mode lets anyone but the owner in, with that mode. */
function openToOthers(dir: string): string[] {
  const found: string[] = [];
  const pending = [dir];
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    const stat = lstatSync(path);
    if ((stat.mode & 0o077) !== 0 && !stat.isSymbolicLink()) found.push(`${(stat.mode & 0o777).toString(8)} ${path}`);
    if (stat.isDirectory()) for (const name of readdirSync(path)) pending.push(join(path, name));
  }
  return found;
}

describe('files the service owns (issue 32, M4)', () => {
  it('are private in the embedded database, those an earlier version left 0666 included', { timeout: 120_000 }, async () => {
    const stateDir = await mkdtemp(join(tmpdir(), 'rcp-private-'));
    dirs.push(stateDir);
    // The database as PGlite alone leaves it, which is how every earlier version left it.
    const pglite = createRequire(import.meta.url).resolve('@electric-sql/pglite');
    const script = `require(${JSON.stringify(pglite)}).PGlite.create(process.argv[1]).then((db) => db.close());`;
    await promisify(execFile)(process.execPath, ['-e', script, join(stateDir, 'pgdata')]);
    expect(openToOthers(join(stateDir, 'pgdata')).length).toBeGreaterThan(100);

    const store = await openStore({ backend: 'embedded', stateDir });
    try {
      await store.query('SELECT 1');
      expect(openToOthers(join(stateDir, 'pgdata'))).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('include state_dir: a service finding it open to others warns and makes it 0700', { timeout: 90_000 }, async () => {
    const receiver = await CallbackReceiver.start();
    const fixture = await writeGateConfig({ callbackUrl: receiver.url });
    dirs.push(fixture.dir);
    const stateDir = join(fixture.dir, 'state');
    await mkdir(stateDir, { recursive: true });
    await chmod(stateDir, 0o755);
    const gate = await startGateProcess(fixture);
    try {
      expect(lstatSync(stateDir).mode & 0o777).toBe(0o700);
      expect(gate.output()).toMatch(/state_dir \S+ was open to other users \(mode 755\)/);
    } finally {
      await gate.kill('SIGTERM');
      await receiver.down();
    }
  });
});
