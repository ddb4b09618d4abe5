import type { WorkloadClass } from '../domain/workload.ts';
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
}

export const SERVICE_NAME = 'research-control-plane';
