import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

// expected duration: ~10 s

/**
 * The real agents' lifecycle hook (worker-gate/launchers/gate-event-hook.mjs, docs/worker-gate.md#running-real-agents)
 * run as the tools run it, against a gate that is slow to answer: a question waits for its answer, since it decides
 * whether the agent ends its turn; any other event lets the agent go on within 2 s and is delivered behind it.
 */

const HOOK = fileURLToPath(new URL('../../worker-gate/launchers/gate-event-hook.mjs', import.meta.url));
const TOKEN = 'hook-test-event-token-0123456789';

interface SlowGate {
  url: string;
  /** The events posted to it, in the order they arrived. */
  events: { event: string }[];
  close(): Promise<void>;
}

/** A gate whose first `slowAnswers` answers come after `delayMs`; the rest at once. */
async function startSlowGate(delayMs: number, slowAnswers: number): Promise<SlowGate> {
  const events: { event: string }[] = [];
  const server: Server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      events.push(JSON.parse(body) as { event: string });
      const answer = () => response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      if (events.length <= slowAnswers) setTimeout(answer, delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent-event`,
    events,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Runs the hook for `hookEvent` with `input` on stdin: what it printed, and how long it held the tool. */
function runHook(gate: SlowGate, hookEvent: string, input: Record<string, unknown>): Promise<{ stdout: string; heldMs: number; code: number | null }> {
  const started = Date.now();
  const child = spawn(process.execPath, [HOOK, hookEvent], {
    env: { PATH: process.env.PATH ?? '', GATE_EVENT_URL: gate.url, GATE_EVENT_TOKEN: TOKEN, RUN_ID: 'hook-run', PROJECT_ID: 'hook-project', AGENT_EVENT_RETRY_SEC: '30' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stdin.end(JSON.stringify({ session_id: 'hook-session', ...input }));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ stdout, heldMs: Date.now() - started, code })));
}

let gate: SlowGate | undefined;
afterEach(() => gate?.close());

describe("the agents' lifecycle hook, against a gate slow to answer", () => {
  it('waits for a question to be taken, answering 3 s late, and refuses the tool call so that the agent ends its turn', { timeout: 20_000 }, async () => {
    gate = await startSlowGate(3_000, 1);
    const question = { tool_name: 'request_user_input', tool_input: { questions: [{ question: 'Which dataset?', options: [{ label: 'A' }, { label: 'B' }] }] } };
    const { stdout, heldMs, code } = await runHook(gate, 'PreToolUse', question);
    expect(code).toBe(0);
    expect(heldMs).toBeGreaterThanOrEqual(3_000);
    expect(JSON.parse(stdout)).toMatchObject({ hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'deny' } });
    expect(gate.events.map((event) => event.event)).toEqual(['ask-user-question']);
  });

  it('lets the agent go on within its 2 s for any other event, and delivers it behind the agent', { timeout: 20_000 }, async () => {
    gate = await startSlowGate(8_000, 2);
    const { stdout, heldMs, code } = await runHook(gate, 'Stop', { last_assistant_message: 'done for now' });
    expect(code).toBe(0);
    expect(stdout).toBe('');
    // Its 2 s, and room for a loaded machine to start Node: well before the gate's first answer.
    expect(heldMs).toBeLessThan(6_000);
    // The detached copy keeps trying until the gate answers in time.
    await expect.poll(() => gate!.events.length, { timeout: 15_000 }).toBeGreaterThanOrEqual(3);
    expect(new Set(gate.events.map((event) => event.event))).toEqual(new Set(['session-idle']));
  });
});
