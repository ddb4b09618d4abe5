import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackReceiver, gateClient, startGateProcess, waitUntil, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';
import { isProcessRunning } from '../support/process.ts';

// Issue 32, M1: when the dispatch script reports no root_pid, the gate took the pid (and the process group) that the
// agent's session-start event named, and a cancel then killed that process tree. Here the "agent" names a process of
// the gate's user that it did not start (in its own group, working outside the project), then pid 1.
let receiver: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;
const started: ChildProcess[] = [];

/** A dispatch script that starts no agent of its own and reports nothing; it leaves the event token to the test. */
const SILENT_SCRIPT = `#!/bin/sh
printf '%s' "$GATE_EVENT_TOKEN" > "$PROJECT_DIR/.event-token"
echo '{}'
`;

function sleeper(cwd: string): ChildProcess {
  const child = spawn('sleep', ['300'], { cwd, detached: true, stdio: 'ignore' });
  started.push(child);
  return child;
}

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  // The silent script leaves the run with no process until the test names one: sampled every second, the gate would
  // end it as a silent exit (gate_error, and the agent's token refused) whenever the test's first steps take over a
  // second on a loaded machine. Sampled every 10 s, the run outlives them.
  fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { stale_project_process_reaper_enabled: false, sample_interval_sec: 10 } });
  const script = join(fixture.dir, 'silent-dispatch.sh');
  await writeFile(script, SILENT_SCRIPT);
  await chmod(script, 0o755);
  const config = JSON.parse(await readFile(fixture.configPath, 'utf8')) as Record<string, unknown>;
  await writeFile(fixture.configPath, JSON.stringify({ ...config, dispatch_script_path: script }));
  gate = await startGateProcess(fixture);
  client = gateClient(fixture);
}, 60_000);

afterAll(async () => {
  for (const child of started) if (child.pid && isProcessRunning(child.pid)) process.kill(child.pid, 'SIGKILL');
  await gate?.kill('SIGTERM');
  await receiver?.down();
  if (fixture) await rm(fixture.dir, { recursive: true, force: true });
});

describe('pids an agent names (issue 32, M1)', () => {
  it("are adopted only for members of the run's cgroup, so a cancel never reaches a process the gate did not start", { timeout: 60_000 }, async () => {
    const runId = 'mallory-run';
    const body = client.dispatchBody(runId);
    const projectDir = join(fixture.projectRoot, String(body.project_dir));
    const prepared = await client.prepare({ run_id: runId, project_id: body.project_id, project_dir: body.project_dir, prompt_file: body.prompt_file, prompt_text: 'x' });
    expect(prepared.status).toBe(200);
    expect((await client.dispatch(body)).status).toBe(200);
    const token = await readFile(join(projectDir, '.event-token'), 'utf8');
    const event = (fields: Record<string, unknown>) => client.call('POST', '/legacy-agent/event', { event: 'session-start', run_id: runId, session_id: 's-1', ...fields }, token);

    const bystander = sleeper(tmpdir());
    expect((await event({ root_pid: bystander.pid, process_group_id: bystander.pid })).status).toBe(200);
    expect((await event({ root_pid: 1, process_group_id: 1 })).status).toBe(200);
    expect(await client.runView(runId)).toMatchObject({ root_pid: null, process_group_id: null });

    // The run has a cgroup, which alone says what is the run's: a process of the gate's user working in the project,
    // but started outside the run, is refused too.
    const intruder = sleeper(projectDir);
    expect((await event({ root_pid: intruder.pid })).status).toBe(200);
    expect(await client.runView(runId)).toMatchObject({ root_pid: null });

    // A member of the run's cgroup is the run's own: named by the agent, it is taken as the root.
    const { cgroup } = (await client.runView(runId)) as { cgroup: { paths: string[] } | null };
    expect(cgroup?.paths.length).toBeGreaterThan(0);
    const own = sleeper(tmpdir());
    for (const path of cgroup!.paths) await writeFile(join(path, 'cgroup.procs'), String(own.pid));
    expect((await event({ root_pid: own.pid })).status).toBe(200);
    expect(await client.runView(runId)).toMatchObject({ root_pid: own.pid, process_group_id: null });

    const cancelled = await client.call('POST', `/runs/${runId}/cancel`);
    expect(cancelled.status).toBe(200);
    const stopped = (cancelled.body.stopped as { pid: number }[]).map((entry) => entry.pid);
    expect(stopped).toContain(own.pid);
    expect(stopped).not.toContain(bystander.pid);
    expect(stopped).not.toContain(intruder.pid);
    await waitUntil('the run\'s own process to stop', () => !isProcessRunning(own.pid!) || undefined, 10_000);
    expect(isProcessRunning(bystander.pid!)).toBe(true);
    expect(isProcessRunning(intruder.pid!)).toBe(true);
    const refused = (await client.dashboard()).body.events as { type?: string; event?: string; data?: Record<string, unknown> }[];
    expect(JSON.stringify(refused)).toContain('agent_pid_refused');
  });
});
