import { readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { hasPaperEvidence, type RunEvidence } from '../contracts/worker-callback.ts';
import { isStrictlyInside } from './project-paths.ts';

const MAX_RESULT_FILES_VISITED = 2000;
const MAX_DEPTH = 8;

function isNonEmptyFile(path: string | null): boolean {
  if (path === null) return false;
  try {
    const stat = statSync(path);
    return stat.isFile() && stat.size > 0;
  } catch {
    return false;
  }
}

function readDecision(path: string | null): { present: boolean; decision: string | null; summary: string | null } {
  if (path === null) return { present: false, decision: null, summary: null };
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

function countNonEmptyJson(dir: string | null): number {
  if (dir === null) return 0;
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

const realpathOrNull = (path: string) => {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
};

/**
 * What evidence the agent left in its project (README "Worker gate"), read when the gate reports readiness. A file
 * that is a symbolic link out of the project counts as absent: the gate reads nothing outside the project for an agent.
 */
export function inspectEvidence(projectDir: string): RunEvidence {
  const project = realpathOrNull(projectDir);
  const inProject = (path: string) => {
    const real = realpathOrNull(path);
    return project !== null && real !== null && isStrictlyInside(project, real) ? path : null;
  };
  const decision = readDecision(inProject(join(projectDir, '.research', 'decision.json')));
  const facts = {
    run_notes: isNonEmptyFile(inProject(join(projectDir, 'run_notes.md'))),
    decision_file: decision.present,
    decision: decision.decision,
    decision_summary: decision.summary,
    results_json_files: countNonEmptyJson(inProject(join(projectDir, 'results'))),
  };
  return { ...facts, sufficient_for_paper: hasPaperEvidence(facts) };
}
