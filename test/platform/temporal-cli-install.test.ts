import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * scripts/install-temporal-cli.sh as a new user meets it: `go install` compiles for minutes without a word, so the
 * script says how long it takes and prints a line at a steady pace until the build ends. A stand-in `go` on PATH
 * builds for three seconds, and the pace is one second here (15 s by default).
 */

const SCRIPT = new URL('../../scripts/install-temporal-cli.sh', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'rcp-cli-install-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FAKE_GO = `#!/bin/sh
case "$1" in
  version) echo "go version go1.26.0 linux/amd64" ;;
  install)
    sleep 3
    printf '#!/bin/sh\\necho "temporal version 1.5.1 (server 1.29.0) (ui 2.40.0)"\\n' > "$GOBIN/temporal"
    chmod +x "$GOBIN/temporal" ;;
  *) exit 1 ;;
esac
`;

describe('building the Temporal CLI', () => {
  it('says up front that it takes minutes, and prints a progress line at a steady pace until it is built', () => {
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'go'), FAKE_GO, { mode: 0o755 });
    const result = spawnSync('bash', [SCRIPT], {
      encoding: 'utf8',
      env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, RCP_CACHE_DIR: join(dir, 'cache'), RCP_PROGRESS_EVERY_SEC: '1', TEMPORAL_CLI_PATH: '' },
    });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/this takes about 5 minutes/);
    const ticks = result.stdout.split('\n').filter((line) => /still building temporal v1\.5\.1 \(\d+s so far\)/.test(line));
    expect(ticks.length).toBeGreaterThanOrEqual(2);
    expect(result.stdout).toMatch(/installed .*temporal-cli-1\.5\.1\/temporal in \d+s/);
    expect(existsSync(join(dir, 'cache', 'temporal-cli-1.5.1', 'temporal'))).toBe(true);
  });
});
