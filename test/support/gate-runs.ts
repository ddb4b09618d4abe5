import { startingRun, type GateRun } from '../../worker-gate/domain/gate-run.ts';

/** A gate's record of run `r-1` (project `p-1`) as its dispatch created it at `at`, with `overrides` on top. */
export function gateRunAt(at: string, overrides: Partial<GateRun> = {}): GateRun {
  const run = startingRun(
    {
      run_id: 'r-1',
      project_id: 'p-1',
      project_name: 'p-1',
      project_dir: '/projects/p-1',
      prompt_file: '/projects/p-1/prompt.md',
      workload_class: 'unknown',
      machine_target: null,
      mode: 'exec',
      model: 'm',
      reasoning_effort: 'low',
      sandbox: 'workspace-write',
      token_budget: null,
      request_hash: 'h',
      vram_baseline_mib: null,
    },
    at,
  );
  return { ...run, ...overrides };
}
