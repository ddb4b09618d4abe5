import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDispatchScript } from '../../worker-gate/dispatch-script.ts';

/**
 * How the gate reads its dispatch script's answer (docs/worker-gate.md#worker-gate, dispatch contract) when the agent the script
 * starts in the background keeps the script's stdout open.
 */

const dir = mkdtempSync(join(tmpdir(), 'rcp-dispatch-script-'));
const pids: number[] = [];
afterAll(() => {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

function script(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

const run = (scriptPath: string) => runDispatchScript({ scriptPath, cwd: dir, env: { PATH: process.env.PATH ?? '' }, timeoutMs: 20_000 });

describe('the dispatch script answer', () => {
  it('is taken as soon as the script has printed its JSON and exited, though its agent keeps stdout open', async () => {
    const started = Date.now();
    const result = await run(script('holds-stdout.sh', 'sleep 30 &\necho "{\\"root_pid\\": $!}"'));
    expect(result).toMatchObject({ ok: true, output: { root_pid: expect.any(Number) } });
    if (result.ok && typeof result.output.root_pid === 'number') pids.push(result.output.root_pid);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('is a 502 when the script printed no JSON, once its output has had a few seconds to arrive', async () => {
    const started = Date.now();
    const result = await run(script('silent.sh', 'sleep 30 &\necho $! > "$PWD/silent.pid"'));
    expect(result).toMatchObject({ ok: false, status: 502, detail: { message: 'dispatch script did not print one JSON object', exit_code: 0 } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);
    pids.push(Number(readFileSync(join(dir, 'silent.pid'), 'utf8')));
  });
});

describe('the argv prefix', () => {
  it('runs first and execs the script as its last argument: the pid the gate records is the script\'s', async () => {
    // The run-cgroup join prefix sets an environment variable here instead of joining, so the order is visible.
    const prefix = ['/bin/sh', '-c', 'export PREFIX_RAN=yes; exec "$@"', 'prefix'];
    let spawned = 0;
    const scriptPath = script('prefixed.sh', 'echo "{\\"prefix_ran\\": \\"$PREFIX_RAN\\", \\"pid\\": $$}"');
    const result = await runDispatchScript({ scriptPath, cwd: dir, env: { PATH: process.env.PATH ?? '' }, timeoutMs: 20_000, argvPrefix: prefix, onSpawn: (pid) => (spawned = pid) });
    expect(result).toMatchObject({ ok: true, output: { prefix_ran: 'yes', pid: spawned } });
  });
});
