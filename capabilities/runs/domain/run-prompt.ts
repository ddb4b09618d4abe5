/**
 * The prompt a run's agent starts from: the research contract of the project's candidate and where the control plane
 * looks for the outcome (docs/worker-gate.md#worker-gate: run_notes.md, .research/decision.json, results/**\/*.json). Pure.
 */

export interface RunPromptContract {
  title: string;
  hypothesis: string | null;
  mechanism: string | null;
  baseline_to_beat: string | null;
  success_threshold: string | null;
  kill_condition: string | null;
  expected_artifacts: readonly string[];
  required_evidence: readonly string[];
}

/** The contract fields of a research candidate, as promotion copies them onto its project. */
export function researchContractOf(candidate: RunPromptContract): RunPromptContract {
  return {
    title: candidate.title,
    hypothesis: candidate.hypothesis,
    mechanism: candidate.mechanism,
    baseline_to_beat: candidate.baseline_to_beat,
    success_threshold: candidate.success_threshold,
    kill_condition: candidate.kill_condition,
    expected_artifacts: candidate.expected_artifacts,
    required_evidence: candidate.required_evidence,
  };
}

export interface RunPromptInput {
  run_id: string;
  project_id: string;
  project_name: string;
  /** Absent for a project that did not come from a candidate. */
  contract: RunPromptContract | null;
}

/** Relative to the project directory; one file per run, so a retried prepare rewrites the same file. */
export const promptFileFor = (runId: string): string => `.research/prompts/${runId}.md`;

const section = (heading: string, body: string | null) => (body && body.trim() ? [`## ${heading}`, body.trim(), ''] : []);
const list = (heading: string, items: readonly string[]) => (items.length > 0 ? [`## ${heading}`, ...items.map((item) => `- ${item}`), ''] : []);

export function buildRunPrompt(input: RunPromptInput): string {
  const contract = input.contract;
  return [
    `# ${contract?.title ?? input.project_name}`,
    '',
    `Project \`${input.project_id}\`, run \`${input.run_id}\`.`,
    '',
    ...section('Hypothesis', contract?.hypothesis ?? null),
    ...section('Mechanism', contract?.mechanism ?? null),
    ...section('Baseline to beat', contract?.baseline_to_beat ?? null),
    ...section('Success threshold', contract?.success_threshold ?? null),
    ...section('Kill condition', contract?.kill_condition ?? null),
    ...list('Expected artifacts', contract?.expected_artifacts ?? []),
    ...list('Required evidence', contract?.required_evidence ?? []),
    '## When you finish',
    '- Write what you did and found to `run_notes.md` in the project directory.',
    '- Put machine-readable results under `results/` as JSON files.',
    '- Write `.research/decision.json` as `{"decision": "finalize_positive" | "negative" | "inconclusive", "summary": "..."}`.',
    '',
  ].join('\n');
}
