import { z } from 'zod';
import { workerGateClient } from './worker-gate-client.ts';
import { isRunFinished } from './domain/run-state.ts';
import { getRun } from './run-ledger.ts';
import type { Store } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
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
  idle_seen_at: z.string().nullable().optional(),
  quiet_window: z
    .object({
      samples_in_window: z.number().int(),
      samples_needed: z.number().int(),
      verdict: z.string().optional(),
      reasons: z.array(z.string()).optional(),
      waiting_sec: z.number().optional(),
      overdue: z.boolean().optional(),
    })
    .nullable()
    .catch(null),
});
type GateRun = z.infer<typeof GateRunSchema>;
const GateDashboardRunsSchema = z.object({ runs: z.array(z.unknown()) });

export interface RunGateView {
  run_id: string;
  lane: string;
  finished: boolean;
  /** Whether the lane's gate holds this run among its most recent ones. */
  seen: boolean;
  gate_state: string | null;
  processes_alive: boolean | null;
  quiet_window: QuietWindowView | null;
  gate_updated_at: string | null;
}

/** The quiet window's last verdict as the gate judged it, for every view of a run that waits. */
export interface QuietWindowView {
  samples_in_window: number;
  samples_needed: number;
  verdict: string | null;
  reasons: string[];
  /** Seconds since the gate first saw idle, stop or end; null from a gate that does not say. */
  waiting_sec: number | null;
  /** Waiting far longer than the window itself (the gate's rule): the run needs a person. */
  overdue: boolean;
  idle_seen_at: string | null;
}

function quietWindowView(found: GateRun): QuietWindowView | null {
  const window = found.quiet_window;
  if (!window) return null;
  return {
    samples_in_window: window.samples_in_window,
    samples_needed: window.samples_needed,
    verdict: window.verdict ?? null,
    reasons: window.reasons ?? [],
    waiting_sec: window.waiting_sec ?? null,
    overdue: window.overdue ?? false,
    idle_seen_at: found.idle_seen_at ?? null,
  };
}

/** The gate's recent runs on `lane`, as far as they parse; throws a CommandRefusedError when it cannot be asked. */
async function laneGateRuns(deps: { dispatch: DispatchSettings }, lane: string, timeoutMs: number): Promise<GateRun[]> {
  const target = deps.dispatch.routing.lanes.get(lane);
  if (!target) throw new CommandRefusedError(409, `the run's lane '${lane}' is not a configured worker target here`);
  const silent = (why: string) => new CommandRefusedError(502, `the run's worker gate (lane '${lane}') did not answer: ${why}`);
  const answer = await workerGateClient(target, { timeoutMs, trace: deps.dispatch.trace })
    .dashboard({ limit: RUNS_ASKED, event_limit: 1 })
    .catch((error: Error) => Promise.reject(silent(error.message)));
  if (answer.status !== 200) throw silent(`the worker gate answered ${answer.status}`);
  const runs = GateDashboardRunsSchema.safeParse(answer.body);
  if (!runs.success) throw new CommandRefusedError(502, `the run's worker gate (lane '${lane}') answered without a runs list`);
  return runs.data.runs.flatMap((entry) => {
    const parsed = GateRunSchema.safeParse(entry);
    return parsed.success ? [parsed.data] : [];
  });
}

/** How long a read model waits for a gate before it shows a run without its quiet window. */
const READ_MODEL_GATE_TIMEOUT_MS = 2_000;

/**
 * The quiet windows of runs still in flight, asked of their lanes' gates at once (one request per lane). A gate that
 * cannot be asked leaves its runs out: a read model shows what it knows rather than failing.
 */
export async function quietWindowsOf(deps: { dispatch: DispatchSettings }, runs: readonly { run_id: string; lane: string }[]): Promise<Map<string, QuietWindowView>> {
  // One request per gate: the lanes (slots) of one target share it.
  const laneByTarget = new Map<string, string>();
  for (const run of runs) {
    const lane = deps.dispatch.routing.lanes.get(run.lane);
    if (lane && !laneByTarget.has(lane.name)) laneByTarget.set(lane.name, run.lane);
  }
  const lanes = [...laneByTarget.values()];
  const found = await Promise.all(lanes.map((lane) => laneGateRuns(deps, lane, READ_MODEL_GATE_TIMEOUT_MS).catch(() => [] as GateRun[])));
  const wanted = new Set(runs.map((run) => run.run_id));
  const views = new Map<string, QuietWindowView>();
  for (const gateRun of found.flat()) {
    const view = wanted.has(gateRun.run_id) ? quietWindowView(gateRun) : null;
    if (view) views.set(gateRun.run_id, view);
  }
  return views;
}

/**
 * A run as its worker gate sees it now, asked of the gate at once: its gate state, whether its processes live, and
 * the quiet window's progress (quiet samples so far of those needed). The callbacks carry the window only once it is
 * judged; this is how an operator (or `rcp runs watch`) follows it while it fills.
 */
export async function runGateView(deps: { store: Store; dispatch: DispatchSettings }, runId: string): Promise<RunGateView> {
  const run = await getRun(deps.store, runId);
  if (!run) throw new CommandRefusedError(404, `unknown run '${runId}'`);
  const found = (await laneGateRuns(deps, run.lane, GATE_TIMEOUT_MS)).find((gateRun) => gateRun.run_id === runId);
  return {
    run_id: runId,
    lane: run.lane,
    finished: isRunFinished(run.state),
    seen: found !== undefined,
    gate_state: found?.gate_state ?? null,
    processes_alive: found?.processes_alive ?? null,
    quiet_window: found ? quietWindowView(found) : null,
    gate_updated_at: found?.updated_at ?? null,
  };
}
