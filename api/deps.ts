import type { Config } from '../config/schema.ts';
import { workerRoutingFrom, type WorkerRouting } from '../domain/lanes.ts';
import type { WorkloadClass } from '../domain/workload.ts';
import type { DispatchOutcome, RunCallback, RunWorkflowInput } from '../workflows/messages.ts';
import type { Store } from '../store/store.ts';

export interface TemporalHealth {
  ok: boolean;
  address: string;
  namespace: string;
  worker_state: string;
  ui_url?: string;
  error?: string;
}

/** What the HTTP layer needs from the rest of the process; tests supply their own. */
export interface AppDeps {
  store: Store;
  controlApiToken: string;
  sessionCookieSecure: boolean;
  /** Absent when this process runs without a Temporal connection (tests of the HTTP layer alone). */
  temporalHealth?: () => Promise<TemporalHealth>;
  dbPath: string;
  /** Workload class of promoted projects whose candidate names none (config default_workload_class). */
  defaultWorkloadClass?: WorkloadClass;
  /** Present when this process also serves the worker gate role: /healthz answers 503 until the gate is ready. */
  workerGateReady?: () => boolean;
  /** Worker targets, lanes and dispatch switches from config; absent in tests of routes that need none. */
  dispatch?: DispatchSettings;
  /** Starts, signals and cancels run workflows; absent when this process has no Temporal connection. */
  runs?: RunLauncher;
}

export type StartedRun = { started: false; reason: string } | { started: true; workflow_id: string; outcome: DispatchOutcome | null };

/** The run workflows, seen from the HTTP layer. */
export interface RunLauncher {
  /** Starts `run:<run_id>` and waits up to waitMs for its dispatch outcome (null when it has none by then). */
  startRun(input: RunWorkflowInput, waitMs: number): Promise<StartedRun>;
  /** Signals a callback to the run's workflow; `closed` when the workflow has already finished or never existed. */
  deliverCallback(runId: string, callback: RunCallback): Promise<'delivered' | 'closed'>;
  /** Requests cancellation and waits up to waitMs for the workflow to close. */
  cancelRun(runId: string, waitMs: number): Promise<'canceled' | 'closed' | 'pending'>;
  /** The run's page in the Temporal UI, when the UI address is known. */
  workflowUiUrl(runId: string): string | null;
}

/** What dispatch, preflight, status and the worker callback need from config. */
export interface DispatchSettings {
  liveDispatchEnabled: boolean;
  routing: WorkerRouting;
  /** completion_callback_token: gate callbacks carry it; preflight compares the gate's fingerprint of it. */
  completionCallbackToken: string;
  dispatchTimeoutSec: number;
  /** max_wait_after_idle_sec: how long a run may wait for its completion callbacks (plus a margin). */
  maxWaitAfterIdleSec: number;
}

export function dispatchSettingsFrom(config: Config): DispatchSettings {
  return {
    liveDispatchEnabled: config.live_dispatch_enabled,
    routing: workerRoutingFrom(config),
    completionCallbackToken: config.completion_callback_token,
    dispatchTimeoutSec: config.dispatch_timeout_sec,
    maxWaitAfterIdleSec: config.max_wait_after_idle_sec,
  };
}

export const SERVICE_NAME = 'research-control-plane';
