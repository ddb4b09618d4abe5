import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LaunchedRuntime } from '../../worker-gate/contract/agent-runtimes.ts';
import { readProcessTable } from '../../worker-gate/process-table.ts';
import { pinnedAgentBinary } from '../../worker-gate/launchers/installed-agents.ts';
import { MessagesServer, ResponsesServer } from '../../scripts/scripted-model-servers.ts';
import { dispatchedRun, preparedRun, startAgentGate, type AgentGate } from '../support/agent-gates.ts';
import { CallbackReceiver, waitUntil } from '../support/gate.ts';
import { isProcessRunning } from '../support/process.ts';
import { testPort } from '../support/ports.ts';

/**
 * The real Codex CLI and Claude Code (scripts/ensure-agents.sh) under a real gate, against scripted model servers that
 * hang, answer 500, or whose tool is killed: a hung model ends the run in minutes as "stalled: …" with the tool gone,
 * and each finishing callback says why the run ended (its cause).
 */

// expected duration: ~80 s

/**
 * Long enough for a tool's start on a loaded machine (the suite runs the real-agent files side by side, a dozen tools
 * at once on two cores: a start took over 20 s there); a hung model is caught after this much silence.
 */
const STALL_SEC = 45;
const RUN_MS = 120_000;
const OPENAI_KEY = 'sk-scripted-model-key-0123456789';
const ANTHROPIC_KEY = 'sk-ant-scripted-model-key-0123456789';

let receiver: CallbackReceiver;
let responses: ResponsesServer;
let messages: MessagesServer;
const gates = {} as Record<LaunchedRuntime, AgentGate>;

const overrides = {
  workload_profiles: { unknown: { stall_after_sec: STALL_SEC } },
  // Claude Code retries a failing model ten times over minutes by default: once is enough to see what it reports.
  agent_credential_env: ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'CLAUDE_CODE_MAX_RETRIES'],
};

beforeAll(async () => {
  for (const runtime of ['codex', 'claude-code'] as const) {
    if (!existsSync(pinnedAgentBinary(runtime))) throw new Error(`${runtime} is not installed at ${pinnedAgentBinary(runtime)}: run bash scripts/ensure-agents.sh (npm test's pretest does)`);
  }
  receiver = await CallbackReceiver.start();
  [responses, messages] = await Promise.all([ResponsesServer.start(await testPort()), MessagesServer.start(await testPort())]);
  [gates.codex, gates['claude-code']] = await Promise.all([
    startAgentGate(receiver, 'codex', { OPENAI_BASE_URL: responses.baseUrl, OPENAI_API_KEY: OPENAI_KEY }, overrides),
    startAgentGate(receiver, 'claude-code', { ANTHROPIC_BASE_URL: messages.baseUrl, ANTHROPIC_API_KEY: ANTHROPIC_KEY, CLAUDE_CODE_MAX_RETRIES: '1' }, overrides),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all(Object.values(gates).map((gate) => gate.process.kill('SIGTERM')));
  await receiver?.down();
  await Promise.all([responses?.down(), messages?.down()]);
  for (const gate of Object.values(gates)) await rm(gate.fixture.dir, { recursive: true, force: true });
});

const SANDBOX: Record<LaunchedRuntime, string> = { codex: 'workspace-write', 'claude-code': 'acceptEdits' };
const serverOf = (runtime: LaunchedRuntime) => (runtime === 'codex' ? responses : messages);

async function dispatched(runtime: LaunchedRuntime, key: string): Promise<{ runId: string; rootPid: number }> {
  const gate = gates[runtime];
  const body = await preparedRun(gate, key, { sandbox: SANDBOX[runtime] });
  const runId = await dispatchedRun(gate, body);
  const view = await waitUntil('the runner to be adopted', async () => (await gate.client.runView(runId))?.root_pid ?? undefined, 30_000);
  return { runId, rootPid: view as number };
}

/** Every process descending from `pid` now. */
function descendantsOf(pid: number): number[] {
  const table = readProcessTable({ withCwd: false });
  const found: number[] = [];
  for (let frontier = [pid]; frontier.length > 0; ) {
    const children = table.filter((proc) => frontier.includes(proc.ppid)).map((proc) => proc.pid);
    found.push(...children);
    frontier = children;
  }
  return found;
}

describe.concurrent.each(['codex', 'claude-code'] as const)('%s under the gate', (runtime) => {
  it('a model that never answers: the run ends in gate_error "stalled: …" after stall_after_sec, and the tool is gone', { timeout: RUN_MS + 30_000 }, async () => {
    const key = `${runtime}-hang`;
    serverOf(runtime).script(key, Array.from({ length: 5 }, () => ({ kind: 'hang' as const })));
    const started = Date.now();
    const { runId, rootPid } = await dispatched(runtime, key);
    const tool = await waitUntil('the tool to start', () => (descendantsOf(rootPid).length > 0 ? descendantsOf(rootPid) : undefined), 60_000);

    const failed = await receiver.waitFor(runId, 'gate_error', RUN_MS);
    expect(failed.body.reason).toMatch(new RegExp(`^stalled: no model answer, tool event or usage change for ${STALL_SEC} s`));
    expect(failed.body.cause).toMatchObject({ kind: 'stall' });
    expect(serverOf(runtime).requestsOf(key).length).toBeGreaterThan(0);
    // Minutes, not the 12 h of max_wait_after_idle_sec.
    expect(failed.at - started).toBeLessThan(RUN_MS);
    await waitUntil('the tool and its runner to be stopped', () => [rootPid, ...tool].every((pid) => !isProcessRunning(pid)), 30_000);
  });

  it('a model answering 500: the run ends in gate_error with cause model_error and the status', { timeout: RUN_MS + 30_000 }, async () => {
    const key = `${runtime}-500`;
    serverOf(runtime).script(key, Array.from({ length: 20 }, () => ({ kind: 'fail' as const, status: 500 })));
    const { runId } = await dispatched(runtime, key);
    const failed = await receiver.waitFor(runId, 'gate_error', RUN_MS);
    expect(failed.body.cause).toMatchObject({ kind: 'model_error', model_status: 500, exit_code: expect.any(Number) });
    expect(failed.body.cause?.message).toBeTruthy();
  });

  it('the tool killed by SIGKILL: the run ends in gate_error with cause signal SIGKILL', { timeout: RUN_MS + 30_000 }, async () => {
    const key = `${runtime}-kill`;
    serverOf(runtime).script(key, Array.from({ length: 5 }, () => ({ kind: 'hang' as const })));
    const { runId, rootPid } = await dispatched(runtime, key);
    await waitUntil('the model request', () => (serverOf(runtime).requestsOf(key).length > 0 ? true : undefined), 90_000);
    const tool = readProcessTable({ withCwd: false }).find((proc) => proc.ppid === rootPid)!;
    process.kill(tool.pid, 'SIGKILL');
    const failed = await receiver.waitFor(runId, 'gate_error', RUN_MS);
    expect(failed.body.cause).toMatchObject({ kind: 'signal', signal: 'SIGKILL', exit_code: 137 });
  });
});
