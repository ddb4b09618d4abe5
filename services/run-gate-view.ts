import { z } from 'zod';
import { workerGateClient } from '../clients/worker-gate-client.ts';
import { isRunFinished } from '../domain/run-state.ts';
import { getRun } from '../store/runs.ts';
import type { Store } from '../store/store.ts';
import { CommandRefusedError } from './command-errors.ts';
import type { DispatchSettings } from './dispatch-settings.ts';

/** How many of its most recently updated runs the gate is asked for: a run in flight is updated at every sample. */
const RUNS_ASKED = 50;
const GATE_TIMEOUT_MS = 5_000;

// The gate is another process, perhaps another version: its answer is read for these fields and nothing else.
const GateRunSchema = z.object({
  run_id: z.string(),
  gate_state: z.string(),
  processes_alive: z.boolean(),
  updated_at: z.string(),
  quiet_window: z
    .object({ samples_in_window: z.number().int(), samples_needed: z.number().int(), verdict: z.string().optional(), reasons: z.array(z.string()).optional() })
    .nullable()
    .catch(null),
});
const GateDashboardRunsSchema = z.object({ runs: z.array(z.unknown()) });

export interface RunGateView {
  run_id: string;
  lane: string;
  finished: boolean;
  /** Whether the lane's gate holds this run among its most recent ones. */
  seen: boolean;
  gate_state: string | null;
  processes_alive: boolean | null;
  quiet_window: { samples_in_window: number; samples_needed: number; verdict: string | null; reasons: string[] } | null;
  gate_updated_at: string | null;
}

/**
 * A run as its worker gate sees it now, asked of the gate at once: its gate state, whether its processes live, and
 * the quiet window's progress (quiet samples so far of those needed). The callbacks carry the window only once it is
 * judged; this is how an operator (or `rcp runs watch`) follows it while it fills.
 */
export async function runGateView(deps: { store: Store; dispatch: DispatchSettings }, runId: string): Promise<RunGateView> {
  const run = await getRun(deps.store, runId);
  if (!run) throw new CommandRefusedError(404, `unknown run '${runId}'`);
  const target = deps.dispatch.routing.targets.get(run.lane);
  if (!target) throw new CommandRefusedError(409, `the run's lane '${run.lane}' is not a configured worker target here`);
  const silent = (why: string) => new CommandRefusedError(502, `the run's worker gate (lane '${run.lane}') did not answer: ${why}`);
  const answer = await workerGateClient(target, { timeoutMs: GATE_TIMEOUT_MS, trace: deps.dispatch.trace })
    .dashboard({ limit: RUNS_ASKED, event_limit: 1 })
    .catch((error: Error) => Promise.reject(silent(error.message)));
  if (answer.status !== 200) throw silent(`the worker gate answered ${answer.status}`);
  const runs = GateDashboardRunsSchema.safeParse(answer.body);
  if (!runs.success) throw new CommandRefusedError(502, `the run's worker gate (lane '${run.lane}') answered without a runs list`);
  const found = runs.data.runs.map((entry) => GateRunSchema.safeParse(entry)).find((parsed) => parsed.success && parsed.data.run_id === runId)?.data;
  return {
    run_id: runId,
    lane: run.lane,
    finished: isRunFinished(run.state),
    seen: found !== undefined,
    gate_state: found?.gate_state ?? null,
    processes_alive: found?.processes_alive ?? null,
    quiet_window: found?.quiet_window
      ? { samples_in_window: found.quiet_window.samples_in_window, samples_needed: found.quiet_window.samples_needed, verdict: found.quiet_window.verdict ?? null, reasons: found.quiet_window.reasons ?? [] }
      : null,
    gate_updated_at: found?.updated_at ?? null,
  };
}
