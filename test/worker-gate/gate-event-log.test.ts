import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigFileSchema } from '../../platform/config/schema.ts';
import { WorkerGate } from '../../worker-gate/worker-gate.ts';

/** log_events decides whether the worker gate writes its event history to state_dir. */

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

async function gateRun(logEvents: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'rcp-gate-events-'));
  dirs.push(dir);
  const config = ConfigFileSchema.parse({
    roles: ['worker_gate'],
    control_api_bearer_token: 'events-control-token-0123456789',
    worker_wake_gate_bearer_token: 'events-gate-token-0123456789ab',
    completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
    completion_callback_token: 'events-callback-token-012345678',
    state_dir: join(dir, 'state'),
    project_root: join(dir, 'projects'),
    dispatch_script_path: join(dir, 'agent.sh'),
    log_events: logEvents,
  });
  const gate = new WorkerGate({ config, logger: pino({ level: 'silent' }), eventUrl: () => 'http://127.0.0.1:9/legacy-agent/event' });
  await gate.start();
  try {
    const prepared = gate.prepare({ run_id: 'ev-run', project_id: 'ev', project_dir: 'ev', prompt_file: 'prompt.md', prompt_text: 'hello', overwrite: true } as never);
    expect(prepared).toMatchObject({ ok: true, run_id: 'ev-run' });
    const shown = (gate.dashboard(10, 10) as { events: { kind: string }[] }).events.map((event) => event.kind);
    return { shown, logPath: join(config.state_dir, 'worker-gate', 'events.jsonl') };
  } finally {
    await gate.stop();
  }
}

describe('log_events', () => {
  it('true: the gate appends its events to state_dir/worker-gate/events.jsonl', async () => {
    const { shown, logPath } = await gateRun(true);
    expect(shown).toEqual(expect.arrayContaining(['gate_started', 'project_prepared']));
    const kinds = readFileSync(logPath, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { kind: string }).kind);
    expect(kinds).toEqual(expect.arrayContaining(['gate_started', 'project_prepared']));
  });

  it('false: the gate writes no event log, and still shows the running process\'s events', async () => {
    const { shown, logPath } = await gateRun(false);
    expect(shown).toEqual(expect.arrayContaining(['gate_started', 'project_prepared']));
    expect(existsSync(logPath)).toBe(false);
  });
});
