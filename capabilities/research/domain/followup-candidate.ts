import { CandidateProposalSchema, type CandidateProposal, type RuntimeClass } from './research-candidate.ts';
import type { RunPromptContract } from '../../runs/domain/run-prompt.ts';
import type { WorkloadClass } from '../../../worker-gate/contract/workload.ts';

/**
 * The follow-up of a run that ended negative or inconclusive without a paper (docs/research.md#follow-ups): one
 * `followup_from_negative` candidate that keeps the parent's test contract, names the parent run and project as its
 * lineage, and says what changes and why, so the planner does not read it as a re-run of a known negative. Pure and
 * deterministic: the same parent always gives the same candidate.
 */

/** The contract fields of the candidate the parent project came from (absent for projects made by hand). */
export interface ParentContract extends Omit<RunPromptContract, 'title'> {
  estimated_runtime_class: RuntimeClass | null;
  likely_failure_modes: readonly string[];
  novelty: number;
  feasibility: number;
  accessibility: number | null;
  falsifiability: number | null;
}

export interface FollowupParent {
  run_id: string;
  project_id: string;
  project_name: string;
  decision: string;
  decision_summary: string | null;
  machine_target: string | null;
  workload_class: WorkloadClass | null;
  contract: ParentContract | null;
}

/** Dimension scores of a follow-up whose parent has no candidate: enough to be considered, not to be admitted alone. */
const UNKNOWN_PARENT_SCORES = { novelty: 6, feasibility: 8, accessibility: 6, falsifiability: 8 };

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** The dedupe key of a parent run's follow-up: one per parent, so a second one merges into the first. */
export const followupDedupeKey = (runId: string): string => clip(`followup:${runId.toLowerCase().replace(/[^a-z0-9._:/-]+/g, '-')}`, 200);

export function buildFollowupCandidate(parent: FollowupParent): CandidateProposal {
  const contract = parent.contract;
  const outcome = `${parent.decision}${parent.decision_summary ? ` ("${clip(parent.decision_summary.trim(), 600)}")` : ''}`;
  const priorMechanism = contract?.mechanism ? `"${clip(contract.mechanism, 1000)}"` : `the setup of project ${parent.project_id}`;
  const scores = contract
    ? { novelty: contract.novelty, feasibility: contract.feasibility, accessibility: contract.accessibility ?? undefined, falsifiability: contract.falsifiability ?? undefined }
    : UNKNOWN_PARENT_SCORES;
  // Parsed, so the candidate holds to the same bounds as any other (and its list defaults are applied).
  return CandidateProposalSchema.parse({
    title: clip(`Follow-up of ${parent.project_name}: test what its ${parent.decision} result leaves open`, 300),
    generation_mode: 'followup_from_negative',
    // Hypothesis and mechanism carry the parent's own words and little template: the planner merges candidates whose
    // words mostly overlap, and two follow-ups must not read as one.
    hypothesis: clip(`${contract?.hypothesis ?? parent.project_name}: revisited after run ${parent.run_id} ended ${outcome}.`, 4000),
    mechanism: clip(`Ablate ${priorMechanism} against the same baseline, then replace the component the ablation blames.`, 4000),
    novelty_comparison: clip(
      `What changed and why: parent run ${parent.run_id} of project ${parent.project_id} ended ${outcome}. ` +
        `This follow-up does not repeat it; it isolates ${priorMechanism} and replaces the part its evidence blames.`,
      4000,
    ),
    baseline_to_beat: contract?.baseline_to_beat ?? `the results of parent run ${parent.run_id}`,
    success_threshold: contract?.success_threshold ?? `a result that reverses the parent's ${parent.decision} decision, or names its cause, on the parent's evidence`,
    kill_condition: contract?.kill_condition ?? `the ablation finds no component to blame and the changed run repeats the ${parent.decision} result`,
    expected_artifacts: [...new Set(['run_notes.md', '.research/decision.json', 'results/ablation.json', ...(contract?.expected_artifacts ?? [])])].slice(0, 50),
    required_evidence: [...new Set([`a comparison with the results of parent run ${parent.run_id}`, ...(contract?.required_evidence ?? [])])].slice(0, 50),
    estimated_runtime_class: contract?.estimated_runtime_class ?? 'hours',
    ...(parent.machine_target ? { machine_target: parent.machine_target } : {}),
    ...(parent.workload_class ? { workload_class: parent.workload_class } : {}),
    likely_failure_modes: [...new Set([`the parent's ${parent.decision} result holds whatever is changed`, ...(contract?.likely_failure_modes ?? [])])].slice(0, 50),
    dedupe_key: followupDedupeKey(parent.run_id),
    parent_project_id: parent.project_id,
    parent_run_id: parent.run_id,
    ...Object.fromEntries(Object.entries(scores).filter(([, value]) => value !== undefined)),
  });
}
