import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { START_COMMAND_ARGS } from '../support/process.ts';

/** docs/getting-started.md#runtime: Node 24 LTS is the supported runtime, and both of the README's commands still work on older Node. */

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(REPO_ROOT, path), 'utf8');
const major = (version: string) => Number(/^v?(\d+)\./.exec(version)?.[1]);

describe('the supported runtime', () => {
  const nvmrc = read('.nvmrc').trim();
  const installScriptVersion = /^readonly VERSION=(\d+\.\d+\.\d+)$/m.exec(read('scripts/install-node24.sh'))?.[1];
  const imageVersion = /^ARG NODE_IMAGE=node:(\d+\.\d+\.\d+)-slim$/m.exec(read('Dockerfile'))?.[1];

  it('is Node 24 everywhere the repository names it', () => {
    expect(nvmrc).toBe('24');
    const packageJson = JSON.parse(read('package.json')) as { engines: { node: string } };
    expect(packageJson.engines.node).toBe('>=24');
    expect(/^const SUPPORTED_MAJOR = (\d+);$/m.exec(read('bin/start.js'))?.[1]).toBe(nvmrc);
    // CI's Node 24 pass and the image run the same release.
    expect(installScriptVersion).toBeDefined();
    expect(major(installScriptVersion!)).toBe(24);
    expect(imageVersion).toBe(installScriptVersion);
  });

  describe('npm start on this Node', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rcp-runtime-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    // A config file that does not exist: the process loads the sources, reports it and exits 2 without binding anything.
    const started = spawnSync(process.execPath, START_COMMAND_ARGS, {
      cwd: dir,
      env: { ...process.env, SVC_CONFIG: join(dir, 'missing.json') },
      encoding: 'utf8',
      timeout: 60_000,
    });
    const warnings = started.stderr.split('\n').filter((line) => line.includes('is not the supported runtime'));

    it('loads the sources and reaches the config check', () => {
      expect(started.stderr).toContain('missing.json: config file not found (from SVC_CONFIG)');
      expect(started.status).toBe(2);
    });

    it(`warns once, naming Node 24 LTS, only on Node older than 24 (this is ${process.version})`, () => {
      if (major(process.version) >= 24) {
        expect(warnings).toEqual([]);
      } else {
        expect(warnings).toEqual([
          `warning: Node ${process.version} is not the supported runtime; research-control-plane supports Node 24 LTS (docs/getting-started.md#runtime). Starting anyway.`,
        ]);
      }
    });

    it('prints no deprecation or experimental warning', () => {
      expect(started.stderr).not.toMatch(/DeprecationWarning|ExperimentalWarning|\[DEP\d+\]/);
    });
  });
});
