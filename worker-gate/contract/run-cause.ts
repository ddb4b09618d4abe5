/**
 * Why a run ended as the gate saw it (docs/worker-gate.md#worker-gate, causes): carried by the finishing callback so that a model
 * answering 500, a crash, a signal, a budget stop, a stall and reaped processes read differently on the control plane.
 */

import { isUsageLimit, usageLimitResetOf } from './usage-limit.ts';

export const RUN_CAUSE_KINDS = ['model_error', 'usage_limit', 'crash', 'signal', 'token_budget', 'stall', 'exit', 'reaped'] as const;
export type RunCauseKind = (typeof RUN_CAUSE_KINDS)[number];

/** Bounds of a cause: it travels in every finishing callback and is shown as is. */
export const RUN_CAUSE_MESSAGE_MAX = 2_000;
export const RUN_CAUSE_COMMAND_MAX = 300;
export const RUN_CAUSE_REAPED_MAX = 20;

export interface ReapedCause {
  pid: number;
  command: string;
  outcome: string;
}

export interface RunCause {
  kind: RunCauseKind;
  exit_code?: number;
  signal?: string;
  /** The HTTP status the model server answered, when the tool's error names one. */
  model_status?: number;
  message?: string;
  /** With usage_limit: when the limit resets, where the tool's words say (ISO 8601). */
  resets_at?: string;
  reaped?: ReapedCause[];
}

const SIGNAL_NAMES: Record<number, string> = { 1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 6: 'SIGABRT', 9: 'SIGKILL', 11: 'SIGSEGV', 13: 'SIGPIPE', 15: 'SIGTERM' };

export const boundedMessage = (text: string): string => (text.length > RUN_CAUSE_MESSAGE_MAX ? `${text.slice(0, RUN_CAUSE_MESSAGE_MAX - 1)}…` : text);

/**
 * The HTTP status a tool's error text names: Codex writes "unexpected status 502 Bad Gateway: …" (and a 500 as "We’re
 * currently experiencing high demand, …"), Claude Code "API Error: 500 {…}". Null when the text names none.
 */
export function modelStatusOf(text: string | null | undefined): number | null {
  if (!text) return null;
  // Codex words a 500 from the model server (its InternalServerError) without the number.
  if (text.includes('currently experiencing high demand')) return 500;
  const match = /\b(?:status(?: code)?|API Error:?)\s*(?:=\s*)?([1-5]\d\d)\b/i.exec(text);
  return match ? Number(match[1]) : null;
}

/**
 * The cause of a tool's end as its runner saw it: a signal it died of, a budget stop, a non-zero exit with the model's
 * error in its stream (a usage limit, with its reset where the tool words one, read against `now`), or without one (a
 * crash). A zero exit is an `exit`.
 */
export function toolEndCause(
  end: { exitCode: number; signal: string | null; lastError: string | null; spawnError: string | null; stoppedOverBudget: boolean },
  now: Date = new Date(),
): RunCause {
  if (end.spawnError) return { kind: 'crash', exit_code: end.exitCode, message: boundedMessage(`the tool did not start: ${end.spawnError}`) };
  const message = end.lastError ? { message: boundedMessage(end.lastError) } : {};
  if (end.stoppedOverBudget) return { kind: 'token_budget', exit_code: end.exitCode, ...(end.signal ? { signal: end.signal } : {}), ...message };
  if (end.signal) return { kind: 'signal', exit_code: end.exitCode, signal: end.signal, ...message };
  if (end.exitCode === 0) return { kind: 'exit', exit_code: 0, ...message };
  const status = modelStatusOf(end.lastError);
  if (end.lastError && (status === 429 || isUsageLimit(end.lastError))) {
    const resetsAt = usageLimitResetOf(end.lastError, now);
    return { kind: 'usage_limit', exit_code: end.exitCode, ...(status === null ? {} : { model_status: status }), ...message, ...(resetsAt ? { resets_at: resetsAt.toISOString() } : {}) };
  }
  if (end.lastError) return { kind: 'model_error', exit_code: end.exitCode, ...(status === null ? {} : { model_status: status }), ...message };
  return { kind: 'crash', exit_code: end.exitCode };
}

/**
 * The cause of a session-end an agent reported without one (a dispatch script's own agent): statuses above 128 are
 * the shell's way of saying a signal ended the process.
 */
export function exitStatusCause(exitCode: number): RunCause {
  if (exitCode === 0) return { kind: 'exit', exit_code: 0 };
  const signal = exitCode > 128 ? SIGNAL_NAMES[exitCode - 128] : undefined;
  return signal ? { kind: 'signal', exit_code: exitCode, signal } : { kind: 'crash', exit_code: exitCode };
}

/** The processes the gate stopped or reaped for a run, bounded, newest last. */
export function reapedCause(reaped: readonly { pid: number; command: string; outcome: string }[]): ReapedCause[] {
  return reaped.slice(-RUN_CAUSE_REAPED_MAX).map(({ pid, command, outcome }) => ({ pid, command: command.slice(0, RUN_CAUSE_COMMAND_MAX), outcome: outcome.slice(0, 40) }));
}
