import { describe, expect, it } from 'vitest';
import { RunCauseSchema, WorkerCallbackSchema } from '../../worker-gate/contract/callback-body.ts';
import { applyRunEvent, type GateRun } from '../../worker-gate/domain/gate-run.ts';
import { gateRunAt } from '../support/gate-runs.ts';
import { detectStall } from '../../worker-gate/domain/gate-run-watch.ts';
import { exitStatusCause, modelStatusOf, toolEndCause } from '../../worker-gate/contract/run-cause.ts';
import { buildCallbackPayload } from '../../worker-gate/callback-payload.ts';

/** Why a run ended (worker-gate/contract/run-cause.ts): as the runner and the gate derive it, and as the control plane accepts it. */

const T0 = '2026-01-01T00:00:00.000Z';
const at = (sec: number) => new Date(Date.parse(T0) + sec * 1000).toISOString();

const running = (): GateRun => gateRunAt(T0, { dispatch_status: 'started' });

describe('the cause of a tool end, as the runner derives it', () => {
  it.each([
    ['a zero exit', { exitCode: 0, signal: null, lastError: null }, { kind: 'exit', exit_code: 0 }],
    ['a signal', { exitCode: 137, signal: 'SIGKILL', lastError: null }, { kind: 'signal', exit_code: 137, signal: 'SIGKILL' }],
    ['Claude Code, a model answering 500', { exitCode: 1, signal: null, lastError: 'API Error: 500 {"type":"error"}' }, { kind: 'model_error', exit_code: 1, model_status: 500, message: 'API Error: 500 {"type":"error"}' }],
    ['Codex, a model answering 502', { exitCode: 1, signal: null, lastError: 'unexpected status 502 Bad Gateway: x' }, { kind: 'model_error', exit_code: 1, model_status: 502, message: 'unexpected status 502 Bad Gateway: x' }],
    ['a model error without a status', { exitCode: 1, signal: null, lastError: 'error sending request' }, { kind: 'model_error', exit_code: 1, message: 'error sending request' }],
    ['a crash', { exitCode: 2, signal: null, lastError: null }, { kind: 'crash', exit_code: 2 }],
  ] as const)('%s', (_name, end, cause) => {
    expect(toolEndCause({ ...end, spawnError: null, stoppedOverBudget: false })).toEqual(cause);
  });

  it('a budget stop wins over the signal that ended the tool; a tool that never started is a crash', () => {
    expect(toolEndCause({ exitCode: 130, signal: 'SIGINT', lastError: null, spawnError: null, stoppedOverBudget: true })).toEqual({ kind: 'token_budget', exit_code: 130, signal: 'SIGINT' });
    expect(toolEndCause({ exitCode: 127, signal: null, lastError: null, spawnError: 'spawn codex ENOENT', stoppedOverBudget: false })).toEqual({ kind: 'crash', exit_code: 127, message: 'the tool did not start: spawn codex ENOENT' });
  });

  it('bounds the message it carries, and reads a status only where the text names one', () => {
    const long = toolEndCause({ exitCode: 1, signal: null, lastError: 'x'.repeat(10_000), spawnError: null, stoppedOverBudget: false });
    expect(long.message).toHaveLength(2_000);
    expect(modelStatusOf('We’re currently experiencing high demand, which may cause temporary errors.')).toBe(500);
    expect(modelStatusOf('connection refused after 500 ms')).toBeNull();
    expect(exitStatusCause(143)).toEqual({ kind: 'signal', exit_code: 143, signal: 'SIGTERM' });
    expect(exitStatusCause(3)).toEqual({ kind: 'crash', exit_code: 3 });
  });
});

describe('the cause a finishing callback carries', () => {
  it('a budget stop the launcher reports, with what the gate reaped for the run', () => {
    const ended = applyRunEvent(running(), { event: 'session-end', received_at: at(5), exit_code: 130, token_budget_exceeded: { budget: 10, tokens_used: 20 } }).run;
    const reaped: GateRun = { ...ended, reaped: [{ pid: 42, outcome: 'killed', at: at(6), command: 'sleep 300' }] };
    const payload = buildCallbackPayload({ run: reaped, callback: { event_type: 'gate_error', observed_at: at(5), reason: ended.gate_reason, quiet_window: null, with_evidence: false }, sample: undefined, evidence: null, seenAt: at(7) });
    expect(payload.cause).toEqual({ kind: 'token_budget', reaped: [{ pid: 42, command: 'sleep 300', outcome: 'killed' }] });
    expect(WorkerCallbackSchema.safeParse(payload).success).toBe(true);
  });

  it('a stall: no progress for stall_after_sec while running; a progress report or an event starts the clock over', () => {
    const run = running();
    expect(detectStall(run, Date.parse(at(599)), 600).callback).toBeNull();
    const stalled = detectStall(run, Date.parse(at(600)), 600);
    expect(stalled.run).toMatchObject({ gate_state: 'error', cause: { kind: 'stall' } });
    expect(stalled.callback).toMatchObject({ event_type: 'gate_error', reason: expect.stringMatching(/^stalled: no model answer, tool event or usage change for 600 s/) });
    const moved = applyRunEvent(run, { event: 'session-start', received_at: at(500) }).run;
    expect(detectStall(moved, Date.parse(at(1000)), 600).callback).toBeNull();
    // A run waiting on its quiet window or a person is not stalled.
    expect(detectStall({ ...run, gate_state: 'question_pending' }, Date.parse(at(5000)), 600).callback).toBeNull();
  });

  it('the control plane refuses a cause of an unknown kind or beyond its bounds', () => {
    expect(RunCauseSchema.safeParse({ kind: 'stall', message: 'x' }).success).toBe(true);
    expect(RunCauseSchema.safeParse({ kind: 'boom' }).success).toBe(false);
    expect(RunCauseSchema.safeParse({ kind: 'crash', message: 'x'.repeat(2_001) }).success).toBe(false);
    expect(RunCauseSchema.safeParse({ kind: 'signal', signal: 'rm -rf' }).success).toBe(false);
    expect(RunCauseSchema.safeParse({ kind: 'reaped', reaped: Array.from({ length: 21 }, (_, i) => ({ pid: i + 1, command: 'c', outcome: 'killed' })) }).success).toBe(false);
    expect(RunCauseSchema.safeParse({ kind: 'exit', extra: 1 }).success).toBe(false);
  });
});
