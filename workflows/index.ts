/** Every workflow the control-plane worker runs (the bundle's entry point). */
export { runWorkflow } from './run.ts';
