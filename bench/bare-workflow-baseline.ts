/**
 * The dispatch bench's baseline (bench/dispatch.ts (b)): bare workflows with one activity on the same Temporal server,
 * started and awaited, and signalled and awaited, each `warmup` times unmeasured and then `measured` times.
 */
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { stats, type Stats } from './figures.ts';
import { goSignal, readyQuery, type bareSignalWorkflow, type bareWorkflow } from './workflows/bare.ts';

const BARE_QUEUE = `bench-bare-${process.pid}`;
const BARE_WORKFLOWS = fileURLToPath(new URL('./workflows/bare.ts', import.meta.url));

export interface Baseline {
  startToResult: Stats;
  signalToResult: Stats;
  stop(): Promise<void>;
}

export async function benchBareWorkflows(address: string, runs: { warmup: number; measured: number }): Promise<Baseline> {
  const { code } = await bundleWorkflowCode({ workflowsPath: BARE_WORKFLOWS, logger: quietLogger });
  const workerConnection = await NativeConnection.connect({ address });
  const worker = await Worker.create({
    connection: workerConnection,
    namespace: 'default',
    taskQueue: BARE_QUEUE,
    workflowBundle: { code },
    activities: { touch: async (input: string) => input },
  });
  const running = worker.run();
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, namespace: 'default' });
  const stop = async () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running.catch(() => undefined);
    await connection.close();
    await workerConnection.close();
  };
  try {
    const startToResult: number[] = [];
    const signalToResult: number[] = [];
    for (let i = 0; i < runs.warmup + runs.measured; i++) {
      const started = performance.now();
      await client.workflow.execute<typeof bareWorkflow>('bareWorkflow', { taskQueue: BARE_QUEUE, workflowId: `bare-${process.pid}-${i}`, args: ['x'] });
      const elapsed = performance.now() - started;
      if (i >= runs.warmup) startToResult.push(elapsed);
    }
    for (let i = 0; i < runs.warmup + runs.measured; i++) {
      const handle = await client.workflow.start<typeof bareSignalWorkflow>('bareSignalWorkflow', {
        taskQueue: BARE_QUEUE,
        workflowId: `bare-signal-${process.pid}-${i}`,
        args: ['x'],
      });
      // The query answers once the first workflow task ran, so the signal meets a waiting workflow.
      await handle.query(readyQuery);
      const started = performance.now();
      await handle.signal(goSignal);
      await handle.result();
      const elapsed = performance.now() - started;
      if (i >= runs.warmup) signalToResult.push(elapsed);
    }
    return { startToResult: stats(startToResult), signalToResult: stats(signalToResult), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: (message: string, meta?: Record<string, unknown>) => console.error(message, meta ?? ''),
};
