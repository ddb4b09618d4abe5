import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { hasPaperEvidence, type RunEvidence } from '../contracts/worker-callback.ts';

const MAX_RESULT_FILES_VISITED = 2000;
const MAX_DEPTH = 8;

function isNonEmptyFile(path: string): boolean {
  try {
    const stat = statSync(path);
    return stat.isFile() && stat.size > 0;
  } catch {
    return false;
  }
}

function readDecision(path: string): { present: boolean; decision: string | null; summary: string | null } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return { present: false, decision: null, summary: null };
  }
  try {
    const parsed = JSON.parse(text) as { decision?: unknown; summary?: unknown };
    return {
      present: true,
      decision: typeof parsed.decision === 'string' ? parsed.decision : null,
      summary: typeof parsed.summary === 'string' ? parsed.summary.slice(0, 2000) : null,
    };
  } catch {
    return { present: true, decision: null, summary: null };
  }
}

function countNonEmptyJson(dir: string): number {
  let count = 0;
  let visited = 0;
  const walk = (current: string, depth: number) => {
    if (depth > MAX_DEPTH || visited > MAX_RESULT_FILES_VISITED) return;
    let entries;
    try {
      entries = readdirSync(current, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      visited++;
      const path = join(current, entry.name);
      if (entry.isDirectory()) walk(path, depth + 1);
      else if (entry.isFile() && entry.name.endsWith('.json') && isNonEmptyFile(path)) count++;
    }
  };
  walk(dir, 0);
  return count;
}

/** What evidence the agent left in its project (README "Worker gate"), read when the gate reports readiness. */
export function inspectEvidence(projectDir: string): RunEvidence {
  const decision = readDecision(join(projectDir, '.research', 'decision.json'));
  const facts = {
    run_notes: isNonEmptyFile(join(projectDir, 'run_notes.md')),
    decision_file: decision.present,
    decision: decision.decision,
    decision_summary: decision.summary,
    results_json_files: countNonEmptyJson(join(projectDir, 'results')),
  };
  return { ...facts, sufficient_for_paper: hasPaperEvidence(facts) };
}
