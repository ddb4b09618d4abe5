import type { operations } from 'research-control-plane/client';
import { table } from './output.ts';

/** The human form of answers that are not lists: what an operator reads after a command that changed something. */

type Json<Operation extends keyof operations, Status extends number> = operations[Operation]['responses'] extends Record<Status, { content: { 'application/json': infer Body } }> ? Body : never;

export type CancelAnswer = Json<'cancelRun', 200> | Json<'cancelRun', 202>;
export type CycleAnswer = Json<'runCycle', 200>;

export function cancelText(answer: CancelAnswer): string {
  if ('cancel_requested' in answer) return `${answer.run_id}: cancel requested; its workflow ${answer.workflow_id} ends the run`;
  if (answer.already_finished) {
    const stopped = answer.gate?.stopped.length ?? 0;
    if (stopped > 0) return `${answer.run_id}: already finished (${answer.state}); its worker gate stopped ${stopped} process${stopped === 1 ? '' : 'es'} still running`;
    return `${answer.run_id}: already finished (${answer.state}); nothing to cancel${answer.gate?.problem ? ` (${answer.gate.problem})` : ''}`;
  }
  return `${answer.run_id}: canceled (run ${answer.state}, queue ${answer.queue_status ?? '-'})`;
}

/** The verdict, then a row per stage: what the cycle did or would do, and why. */
export function cycleText(answer: CycleAnswer): string {
  const cycle = answer.run_cycle_id ? `  cycle ${answer.run_cycle_id}` : '';
  return [`${answer.action}: ${answer.reason}${cycle}`, table(answer.stages, ['name', 'action', 'reason'])].join('\n');
}

type RunCause = NonNullable<Json<'getRun', 200>['run']['cause']>;

/** Why a run ended, in a few words: its kind, then what the worker told of it (status, signal, exit, reaped processes). */
export function causeText(cause: RunCause | null | undefined): string {
  if (!cause) return '';
  const parts: string[] = [cause.kind];
  if (cause.model_status !== undefined) parts.push(`model ${cause.model_status}`);
  if (cause.signal) parts.push(cause.signal);
  else if (cause.exit_code !== undefined) parts.push(`exit ${cause.exit_code}`);
  if (cause.reaped?.length) parts.push(`${cause.reaped.length} reaped`);
  return parts.join(' ');
}
