import { Context } from '@temporalio/activity';

/** Well inside the heartbeat timeout the workflow gives these activities (workflows/runs/run-workflow.ts, workflows/papers/paper-workflow.ts). */
const HEARTBEAT_EVERY_MS = 1_000;

/**
 * Heartbeats while `work` runs: a worker that dies mid-call stops heartbeating, so the server gives the call to a
 * live worker after the heartbeat timeout instead of after the whole start-to-close timeout.
 */
export async function heartbeating<T>(work: () => Promise<T>): Promise<T> {
  const context = Context.current();
  context.heartbeat();
  const timer = setInterval(() => context.heartbeat(), HEARTBEAT_EVERY_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
