import { condition, defineQuery, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';

/**
 * Baselines for bench/dispatch.ts: the least a workflow with one activity costs on the same Temporal server, with
 * nothing of the control plane in it (no database, no HTTP). Run on a task queue of their own.
 */

export interface BareActivities {
  touch(input: string): Promise<string>;
}

const { touch } = proxyActivities<BareActivities>({ startToCloseTimeout: '10 seconds' });

export const goSignal = defineSignal('go');
export const readyQuery = defineQuery<boolean>('ready');

/** Start → result: one activity. */
export async function bareWorkflow(input: string): Promise<string> {
  return touch(input);
}

/** Signal → result: waits for one signal, then runs one activity. */
export async function bareSignalWorkflow(input: string): Promise<string> {
  let go = false;
  setHandler(readyQuery, () => true);
  setHandler(goSignal, () => {
    go = true;
  });
  await condition(() => go);
  return touch(input);
}
