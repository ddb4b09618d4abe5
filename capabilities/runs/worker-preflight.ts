import { callbackTokenFingerprint } from '../../platform/http/tokens.ts';
import type { DispatchSettings } from './dispatch-settings.ts';
import type { WorkerTarget } from './domain/worker-lanes.ts';
import {
  DISPATCH_REQUIRED_CHECKS,
  evaluatePreflight,
  PREFLIGHT_DEFAULTS,
  type GateObservation,
  type PreflightOptions,
  type PreflightResult,
} from './domain/preflight-checks.ts';
import { readFlags } from './queue-flags.ts';
import type { Store } from '../../platform/store/store.ts';
import { insertWorkerObservation } from './worker-observations.ts';
import { WorkerGateError, workerGateClient, type WorkerGateResponse } from './worker-gate-client.ts';

export interface PreflightDeps {
  store: Store;
  settings: DispatchSettings;
}

export interface WorkerPreflightRun extends PreflightOptions {
  target: WorkerTarget;
  run_id?: string;
  /** False for a dry run, which writes nothing: the result is not kept as a worker observation. Default true. */
  cache?: boolean;
}

/** A preflight must answer quickly even when the worker hangs. */
const MAX_GATE_CALL_SEC = 10;

const SOCKET_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
  ENOTFOUND: 'host not found',
};

function readableReason(message: string): string {
  const code = Object.keys(SOCKET_ERRORS).find((name) => message.includes(name));
  return code ? `${SOCKET_ERRORS[code]} (${message})` : message;
}

async function observe(call: () => Promise<WorkerGateResponse>): Promise<GateObservation> {
  try {
    const response = await call();
    return { status: response.status, body: response.body, ms: response.ms };
  } catch (error) {
    if (!(error instanceof WorkerGateError)) throw error;
    return { status: null, body: null, error: readableReason(error.message) };
  }
}

/**
 * Calls the gate (healthz, then dashboard/api with the target's token), evaluates, and caches the result as a worker
 * observation (skipped, not failed, on a read-only store). Never throws for an unreachable gate: that is a failed check.
 */
export async function runWorkerPreflight(deps: PreflightDeps, run: WorkerPreflightRun): Promise<PreflightResult> {
  const { target, run_id, cache = true, ...options } = run;
  const timeoutMs = Math.min(deps.settings.dispatchTimeoutSec, MAX_GATE_CALL_SEC) * 1000;
  const gate = workerGateClient(target, { timeoutMs, trace: deps.settings.trace });
  const [flags, healthz] = await Promise.all([readFlags(deps.store), observe(() => gate.healthz())]);
  // With no answer to /healthz a second call would only wait out another timeout.
  const dashboard = healthz.status === null ? null : await observe(() => gate.dashboard({ limit: 1, event_limit: 1 }));
  const result = evaluatePreflight(
    target.name,
    { flags, healthz, dashboard, expectedCallbackFingerprint: callbackTokenFingerprint(deps.settings.completionCallbackToken) },
    options,
  );
  if (cache && !deps.store.readOnly) {
    await deps.store.transaction((tx) =>
      insertWorkerObservation(tx, {
        target: target.name,
        wake_gate_url: target.wake_gate_url,
        ok: result.ok,
        summary: result.summary,
        checks: result.checks,
        run_id: run_id ?? null,
      }),
    );
  }
  return result;
}

/**
 * The preflight a live dispatch runs (and what status and the dispatch dry run report): non-strict thresholds, and
 * passing only when the checks the run itself needs pass (DISPATCH_REQUIRED_CHECKS).
 */
export function dispatchPreflight(
  deps: PreflightDeps,
  target: WorkerTarget,
  options: { run_id?: string; cache?: boolean } = {},
): Promise<PreflightResult> {
  return runWorkerPreflight(deps, {
    target,
    require_paused: false,
    strict: false,
    max_gpu_pct: PREFLIGHT_DEFAULTS.max_gpu_pct,
    min_memory_available_mib: target.min_memory_available_mib ?? PREFLIGHT_DEFAULTS.min_memory_available_mib,
    required: DISPATCH_REQUIRED_CHECKS,
    capacity: { slots: target.slots, gpus: target.gpus },
    ...options,
  });
}
