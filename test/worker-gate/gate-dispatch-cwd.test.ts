import { chmod, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSwapper } from '../support/swapper.ts';
import { CallbackReceiver, gateClient, startGateProcess, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';

// Issue 32, deliverable 1: the project directory is opened once and the dispatch script starts in that directory, not
// at its path again. An agent's process swaps its project directory for a link out of project_root in a loop while
// the gate is asked to dispatch: no script may ever start outside project_root.
let receiver: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;
let cwdLog: string;

/**
 * Records which directory it was started in, by the marker each one holds (in its sandbox the gate shows the project
 * at its path, so the path alone would not tell), then fails, so that the run is dropped and the project is free for
 * the next dispatch. It writes where every run's sandbox may (agent_writable_paths).
 */
const recordingScript = (log: string) => `#!/bin/sh
cat ./where >> '${log}' 2>/dev/null || echo "no marker in $(pwd -P)" >> '${log}'
exit 1
`;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  fixture = await writeGateConfig({ callbackUrl: receiver.url });
  cwdLog = join(dirname(fixture.counterFile), 'cwd.log');
  const script = join(fixture.dir, 'recording-dispatch.sh');
  await writeFile(script, recordingScript(cwdLog));
  await chmod(script, 0o755);
  const config = JSON.parse(await readFile(fixture.configPath, 'utf8')) as Record<string, unknown>;
  await writeFile(fixture.configPath, JSON.stringify({ ...config, dispatch_script_path: script }));
  gate = await startGateProcess(fixture);
  client = gateClient(fixture);
}, 60_000);

afterAll(async () => {
  await gate?.kill('SIGTERM');
  await receiver?.down();
  if (fixture) await rm(fixture.dir, { recursive: true, force: true });
});

const startedIn = async () => (await readFile(cwdLog, 'utf8').catch(() => '')).split('\n').filter(Boolean);

describe('dispatch starts the script in the pinned project directory', () => {
  it('refuses a project directory that is a link out of project_root, running nothing', async () => {
    const away = join(fixture.dir, 'away-linked');
    await mkdir(away, { recursive: true });
    await mkdir(fixture.projectRoot, { recursive: true });
    await symlink(away, join(fixture.projectRoot, 'linked'));
    const answer = await client.dispatch(client.dispatchBody('linked-run'));
    expect(answer.status).toBe(400);
    expect(await startedIn()).toEqual([]);
  });

  it('never starts the script outside project_root while the project link is pointed in and out of it in a loop', { timeout: 60_000 }, async () => {
    const away = join(fixture.dir, 'away-racing');
    const inside = join(fixture.projectRoot, 'racing-real');
    await mkdir(away, { recursive: true });
    await mkdir(inside, { recursive: true });
    await writeFile(join(away, 'where'), `${away}\n`);
    await writeFile(join(inside, 'where'), `${inside}\n`);
    // A link to a directory inside project_root is allowed; the same link pointed outside between the checks and the
    // start must not carry the script there.
    await symlink(inside, join(fixture.projectRoot, 'racing'));
    const swapper = startSwapper(join(fixture.projectRoot, 'racing'), { kind: 'relink', content: inside, linkTo: away, durationMs: 30_000 });
    const statuses = new Set<number>();
    try {
      for (let i = 0; i < 150; i++) {
        const answer = await client.dispatch(client.dispatchBody(`racing-${i}-run`, { project_id: 'racing', project_dir: 'racing' }));
        statuses.add(answer.status);
      }
    } finally {
      await swapper.stop();
    }
    // 400: the link pointed out when it was looked at; 502: the script ran (and failed, as written).
    expect([...statuses].sort()).toEqual([400, 502]);
    const places = await startedIn();
    expect(places.length).toBeGreaterThan(10);
    expect(places.filter((place) => place !== inside)).toEqual([]);
  });
});
