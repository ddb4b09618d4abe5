import { DefaultLogger, Runtime } from '@temporalio/worker';

/** Keeps the SDK's per-state-change INFO lines out of test output; safe to call more than once per process. */
export function quietTemporalLogs(): void {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Already installed in this worker process.
  }
}
