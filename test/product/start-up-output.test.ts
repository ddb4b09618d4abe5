import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { locateTemporalCli } from '../../platform/temporal/temporal-cli.ts';
import { firstRunConfig } from '../../platform/config/first-run.ts';
import { START_COMMAND_ARGS } from '../support/process.ts';
import { testPort } from '../support/ports.ts';

// expected duration: ~45 s

/**
 * The first start builds the Temporal CLI: its build's lines come through the log, in order after the line that
 * announces the build, rather than straight to the terminal ahead of log lines still buffered. `go` here is a
 * stand-in that prints as `go install` does and "builds" a wrapper around the real CLI, so the build takes no minutes.
 */
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rcp-start-output-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 500 });
});

describe('the first start that builds the Temporal CLI', () => {
  it('logs the build lines in order, as log lines', { timeout: 180_000 }, async () => {
    const realCli = locateTemporalCli();
    if (!realCli) throw new Error('the Temporal CLI is not installed: run bash scripts/install-temporal-cli.sh (npm test\'s pretest does)');
    const bin = join(dir, 'bin');
    await mkdir(bin);
    const go = join(bin, 'go');
    await writeFile(
      go,
      [
        '#!/bin/sh',
        'case "$1" in',
        '  version) if [ "$2" = -m ]; then printf "\\tmod\\tgithub.com/temporalio/cli\\tv1.5.1\\th1:stand-in\\n"; else echo "go version go1.24.0 linux/amd64"; fi ;;',
        '  install) echo "go: downloading github.com/temporalio/cli v1.5.1" >&2',
        `    printf '#!/bin/sh\\nexec ${realCli} "$@"\\n' > "$GOBIN/temporal"; chmod +x "$GOBIN/temporal" ;;`,
        'esac',
      ].join('\n'),
    );
    await chmod(go, 0o755);
    const cwd = join(dir, 'install');
    // The first-run config, with the Temporal UI off: its fixed port could be another test's.
    await mkdir(join(cwd, 'state'), { recursive: true });
    await writeFile(join(cwd, 'state', 'config.json'), JSON.stringify({ ...firstRunConfig(), temporal_ui_enabled: false }), { mode: 0o600 });
    const { TEMPORAL_CLI_PATH: _cli, LOG_FORMAT: _format, LOG_LEVEL: _level, ...inherited } = process.env;
    const child = spawn(process.execPath, [...START_COMMAND_ARGS], {
      cwd,
      env: {
        ...inherited,
        PATH: `${bin}:/usr/bin:/bin`,
        RCP_CACHE_DIR: join(dir, 'cache'),
        RCP_LISTEN_PORT: String(await testPort()),
        SVC_CONFIG: '',
        SVC_CONTROL_PLANE_CONFIG: '',
        TEMPORAL_ADDRESS: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      const deadline = Date.now() + 150_000;
      while (!output.includes('stop with Ctrl-C')) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no banner:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
    const lines = output.split('\n');
    // Nothing of the build's reaches the output but through the log.
    expect(lines.filter((line) => !line.startsWith('{') && /\[temporal-cli\]|^go: /.test(line)), output).toEqual([]);
    const messages = lines.filter((line) => line.startsWith('{')).map((line) => (JSON.parse(line) as { msg: string }).msg);
    const announced = messages.indexOf('the Temporal CLI is not installed yet; building it once (a few minutes)');
    const building = messages.findIndex((msg) => msg.startsWith('[temporal-cli] building temporal v1.5.1'));
    const downloading = messages.indexOf('go: downloading github.com/temporalio/cli v1.5.1');
    const installed = messages.findIndex((msg) => msg.startsWith('[temporal-cli] installed '));
    const devServer = messages.findIndex((msg) => msg.startsWith('starting Temporal dev server'));
    expect(announced, output).toBeGreaterThanOrEqual(0);
    expect([announced, building, downloading, installed, devServer].every((index, at, all) => at === 0 || index > all[at - 1]!), output).toBe(true);
  });
});
