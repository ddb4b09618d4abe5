/** Every workflow the control-plane worker runs (the bundle's entry point). */
export { runWorkflow } from './runs/run-workflow.ts';
export { paperWorkflow } from './paper.ts';
export { paperRewriteBatchWorkflow } from './paper-rewrite-batch.ts';
export { paperDraftNextWorkflow } from './paper-draft-next.ts';
export { researchCycleWorkflow } from './research-cycle.ts';
export { queuePumpWorkflow } from './queue-pump.ts';
export { queueAlertWorkflow } from './queue-alert.ts';
