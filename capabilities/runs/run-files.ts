import type { z } from 'zod';
import { RunFileContentSchema, RunFilesSchema, type RunFileContent, type RunFiles } from '../../worker-gate/contract/run-files.ts';
import { workerGateClient } from './worker-gate-client.ts';
import { getRun } from './run-ledger.ts';
import type { DispatchSettings } from './dispatch-settings.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';

/**
 * A run's result files, asked of the gate of its lane (docs/runs.md#a-runs-result-files): the list with sizes and
 * hashes, and one file's capped preview. They are read on the worker when asked, so they are the project's files as
 * they are now. The gate is another machine: its answer is parsed, and what does not parse is a 502.
 */

/** A preview reaches 2 MiB; a gate on a busy machine may take a while to read and hash it. */
const GATE_FILES_TIMEOUT_MS = 15_000;

async function askGate<T extends z.ZodType>(deps: { store: Queryable; dispatch: DispatchSettings }, runId: string, schema: T, ask: (client: ReturnType<typeof workerGateClient>) => Promise<{ status: number; body: unknown }>): Promise<z.output<T>> {
  const run = await getRun(deps.store, runId);
  if (!run) throw new CommandRefusedError(404, `unknown run '${runId}'`);
  const lane = deps.dispatch.routing.lanes.get(run.lane);
  if (!lane) throw new CommandRefusedError(409, `the run's lane '${run.lane}' is not a configured worker target here`);
  const silent = (why: string) => new CommandRefusedError(502, `the run's worker gate (lane '${run.lane}') did not answer: ${why}`);
  const answer = await ask(workerGateClient(lane, { timeoutMs: GATE_FILES_TIMEOUT_MS, trace: deps.dispatch.trace })).catch((error: Error) => Promise.reject(silent(error.message)));
  if (answer.status === 404 || answer.status === 400 || answer.status === 409) throw new CommandRefusedError(answer.status, `the run's worker gate: ${gateDetail(answer.body)}`);
  if (answer.status !== 200) throw silent(`it answered ${answer.status}`);
  const parsed = schema.safeParse(answer.body);
  if (!parsed.success) throw new CommandRefusedError(502, `the run's worker gate (lane '${run.lane}') answered without a usable file list; is it older than result files?`);
  return parsed.data;
}

function gateDetail(body: unknown): string {
  const detail = body && typeof body === 'object' ? (body as { detail?: unknown }).detail : undefined;
  return typeof detail === 'string' ? detail.slice(0, 500) : 'refused';
}

export function readRunFiles(deps: { store: Queryable; dispatch: DispatchSettings }, runId: string): Promise<RunFiles> {
  return askGate(deps, runId, RunFilesSchema, (gate) => gate.runFiles(runId));
}

export function readRunFile(deps: { store: Queryable; dispatch: DispatchSettings }, runId: string, path: string): Promise<RunFileContent> {
  return askGate(deps, runId, RunFileContentSchema, (gate) => gate.runFile(runId, path));
}
