/** Every workflow the control-plane worker runs (the bundle's entry point). */
export { runWorkflow } from './runs/run-workflow.ts';
export { paperWorkflow } from './papers/paper-workflow.ts';
export { paperRewriteBatchWorkflow } from './papers/rewrite-batch-workflow.ts';
export { paperDraftNextWorkflow } from './papers/draft-next-workflow.ts';
export { researchCycleWorkflow } from './automation/research-cycle-workflow.ts';
export { queuePumpWorkflow } from './automation/queue-pump-workflow.ts';
export { queueAlertWorkflow } from './automation/queue-check-workflow.ts';
