/**
 * A premature stop (docs/worker-gate.md#continuing-a-premature-stop): an agent that ended its session without what its
 * run is judged on (its run notes and its decision file) is resumed with a prompt that names what is missing, a
 * bounded number of times, before its run is judged. Pure.
 */
import type { RunEvidence } from '../contract/callback-body.ts';
import type { GateRun } from './gate-run.ts';

/** The prefix of a premature stop's resume ids: `continue-1`, `continue-2`, … */
export const CONTINUE_PREFIX = 'continue-';

/** How many times the gate has continued the run after a premature stop. */
export const continuationsOf = (run: GateRun): number => (run.resumes ?? []).filter((resume) => resume.resume_id.startsWith(CONTINUE_PREFIX)).length;

/** Tokens the run may still spend; null: it has no budget. */
export const budgetLeftOf = (run: GateRun): number | null => (run.token_budget ? run.token_budget - (run.token_usage?.total_tokens ?? 0) : null);

/**
 * What a run is judged on, each as the run's prompt names it. The prompt also asks for results as JSON; a run without
 * any is still judged, on its notes and decision, so they are not asked for again.
 */
const EVIDENCE_ASKED = [
  { has: (evidence: RunEvidence) => evidence.run_notes, missing: '`run_notes.md` in the project directory: what you did and found' },
  { has: (evidence: RunEvidence) => evidence.decision_file, missing: '`.research/decision.json`: {"decision": "finalize_positive" | "negative" | "inconclusive", "summary": "..."}' },
] as const;

/** What the agent left out, in the prompt's words; empty when the run's evidence is whole. */
export function missingEvidence(evidence: RunEvidence): string[] {
  return EVIDENCE_ASKED.filter((item) => !item.has(evidence)).map((item) => item.missing);
}

/** The prompt a premature stop's session resumes with: what is missing, and that the run is judged on it. */
export function continuePrompt(missing: readonly string[]): string {
  return [
    'Your session ended, but the run is not finished: it is judged on files you have not written yet.',
    '',
    'Missing:',
    ...missing.map((item) => `- ${item}`),
    '',
    'Continue the work where you stopped, write these files, then end your session.',
  ].join('\n');
}

/** Whether a run whose session ended without its evidence is continued, or judged as it is. */
export function continuationVerdict(input: {
  missing: readonly string[];
  continuationsSoFar: number;
  limit: number;
  /** Tokens the run may still spend; null: no budget. */
  budgetLeft: number | null;
}): { continue: true } | { continue: false; reason: string } {
  if (input.missing.length === 0) return { continue: false, reason: 'the run left its evidence' };
  if (input.continuationsSoFar >= input.limit) return { continue: false, reason: `continued ${input.continuationsSoFar} time(s), agent_continue_limit ${input.limit}` };
  if (input.budgetLeft !== null && input.budgetLeft <= 0) return { continue: false, reason: 'the run has spent its token budget' };
  return { continue: true };
}
