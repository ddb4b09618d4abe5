import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CALLBACK_TOKEN, CONTROL_TOKEN, GATE_TOKEN, waitUntil } from '../support/gate.ts';
import { RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';

/**
 * What an agent can do with what the gate hands it (docs/security.md#security-model), tried on real processes: a control plane,
 * a worker gate, and a fake agent dispatched live, whose environment is read from /proc as any process of its user
 * could.
 */

let stack: RunStack;

beforeAll(async () => {
  stack = await startRunStack({ controlPlaneOverrides: { agent_model: 'config-model-1', agent_reasoning_effort: 'high' } });
}, RUN_STACK_START_MS);

afterAll(() => stack?.close());

function environmentOf(pid: number): Map<string, string> {
  const text = readFileSync(`/proc/${pid}/environ`, 'utf8');
  return new Map(
    text
      .split('\0')
      .filter((entry) => entry.includes('='))
      .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)] as [string, string]),
  );
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

async function gateCall(method: string, path: string, token: string, body?: unknown) {
  const response = await fetch(`${stack.gateFixture.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

/** The completion the agent of finding 1 forged: finished, with positive evidence sufficient for a paper. */
function forgedCompletion(runId: string, projectId: string) {
  const now = new Date().toISOString();
  return {
    event_type: 'session_finished_ready',
    run_id: runId,
    session_id: 'forged',
    project_id: projectId,
    gate_state: 'finished_ready',
    reason: 'forged by the agent',
    idle_seen_at: now,
    seen_at: now,
    delivered_at: now,
    telemetry: { cpu_pct: 0, gpu_pct: null, vram_used_mib: null, vram_baseline_mib: null, memory_available_mib: 64000, gpu_source: 'none', quiet_window: null },
    process_tracking: { root_pid: null, process_group_id: null, tmux_session: null, root_alive: false, alive_pids: [], reaped_pids: [] },
    evidence: { run_notes: true, decision_file: true, decision: 'positive', decision_summary: 'forged', results_json_files: 1, sufficient_for_paper: true },
    idempotency_key: `${runId}:session_finished_ready:forged`,
  };
}

describe('the credential an agent holds', () => {
  it('is its own run\'s event token: good for that run\'s events while the run lives, and for nothing else', { timeout: 180_000 }, async () => {
    const { api } = stack;
    const projectId = 'agent-creds';
    await stack.seed(projectId, { projectName: 'Agent credentials', scenario: { scenario: 'hold' } });
    const agent = { sandbox: 'workspace-write', model: 'call-model-7' };
    const dry = await api('POST', '/control/dispatch-next', { dry_run: true, requested_by: 'security-test', agent });
    expect(dry.body.agent).toEqual({ mode: 'exec', model: 'call-model-7', reasoning_effort: 'high', sandbox: 'workspace-write' });
    const live = await api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'security-test', agent });
    expect(live.status, JSON.stringify(live.body)).toBe(200);
    stack.agents.remember(live.body);
    const runId = live.body.run_id as string;
    const rootPid = live.body.dispatch.root_pid as number;

    // What the agent was handed, read the way any process of its user could.
    const environment = environmentOf(rootPid);
    const token = environment.get('GATE_EVENT_TOKEN');
    // The agent settings: the call's over the configured defaults.
    expect([environment.get('MODEL'), environment.get('REASONING_EFFORT'), environment.get('SANDBOX')]).toEqual(['call-model-7', 'high', 'workspace-write']);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    const environmentText = [...environment.values()].join('\n');
    for (const configured of [CONTROL_TOKEN, GATE_TOKEN, CALLBACK_TOKEN]) expect(environmentText).not.toContain(configured);
    // The gate keeps only a hash of it.
    for (const file of filesUnder(join(stack.gateFixture.dir, 'state'))) expect(readFileSync(file, 'utf8'), file).not.toContain(token!);

    // The agent's own session-start went through with it and reached the control plane.
    const transitions = async () =>
      ((await api('GET', `/control/api/projects/${projectId}`)).body.runs[0].transitions as { transition: string }[]).map((t) => t.transition);
    await waitUntil('the agent\'s session_started to arrive', async () => ((await transitions()).includes('session_started') ? true : undefined), 60_000, 300);
    expect((await gateCall('POST', '/legacy-agent/event', token!, { event: 'session-start', run_id: runId })).status).toBe(200);

    // It cannot declare its run finished, nor steer the control plane.
    const forged = await api('POST', '/control/api/worker-callback', forgedCompletion(runId, projectId), token);
    expect(forged.status).toBe(401);
    expect(forged.body).toEqual({ detail: 'invalid bearer token' });
    for (const [method, path, body] of [
      ['POST', '/control/pause', { reason: 'agent', paused_by: 'agent' }],
      ['POST', '/control/dispatch-next', { dry_run: false, requested_by: 'agent' }],
      ['POST', `/control/api/runs/${runId}/cancel`, {}],
      ['GET', '/control/api/status', undefined],
    ] as const) {
      expect((await api(method, path, body, token)).status, `${method} ${path}`).toBe(401);
    }
    // Nor use the gate's own routes, nor report for another run.
    for (const [method, path, body] of [
      ['POST', '/dispatch', { run_id: `${projectId}-x`, project_id: projectId, project_dir: projectId, prompt_file: 'prompt.md' }],
      ['POST', '/prepare-project', { run_id: `${projectId}-x`, project_id: projectId, project_dir: projectId, prompt_file: 'p.md', prompt_text: 'x', overwrite: true }],
      ['POST', `/runs/${runId}/cancel`, undefined],
      ['GET', '/dashboard/api', undefined],
      ['POST', '/legacy-agent/event', { event: 'session-end', run_id: 'someone-else-20300101T000000Z' }],
      ['POST', '/legacy-agent/event', { event: 'session-end', project_id: projectId }],
    ] as const) {
      expect((await gateCall(method, path, token!, body)).status, `${method} ${path} ${JSON.stringify(body)}`).toBe(401);
    }
    const detail = (await api('GET', `/control/api/projects/${projectId}`)).body;
    expect(detail.queue_item.status).not.toBe('completed');
    expect(detail.runs[0].state).not.toBe('reconciled');

    // Once the run is over (here: cancelled by the operator), its token is dead; the control token still works there.
    expect((await api('POST', `/control/api/runs/${runId}/cancel`, { requested_by: 'security-test', reason: 'test over' })).status).toBe(200);
    await waitUntil('the gate to mark the run cancelled', async () => ((await stack.gateApi.runView(runId))?.gate_state === 'cancelled' ? true : undefined), 60_000, 300);
    const late = await gateCall('POST', '/legacy-agent/event', token!, { event: 'session-end', run_id: runId });
    expect(late.status).toBe(401);
    const byHand = await gateCall('POST', '/legacy-agent/event', CONTROL_TOKEN, { event: 'session-end', run_id: runId });
    expect(byHand.status).toBe(200);
    expect(byHand.body).toMatchObject({ run_id: runId, ignored: true });
  });
});
