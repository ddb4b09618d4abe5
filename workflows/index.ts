/** Every workflow the control-plane worker runs (the bundle's entry point). */
export { runWorkflow } from './runs/run-workflow.ts';
export { paperWorkflow } from './papers/paper-workflow.ts';
export { paperRewriteBatchWorkflow } from './papers/rewrite-batch-workflow.ts';
export { paperDraftNextWorkflow } from './papers/draft-next-workflow.ts';
export { researchCycleWorkflow } from './research-cycle.ts';
export { queuePumpWorkflow } from './queue-pump.ts';
export { queueAlertWorkflow } from './queue-alert.ts';
