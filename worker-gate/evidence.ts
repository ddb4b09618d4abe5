import { relative } from 'node:path';
import { hasPaperEvidence, type RunEvidence } from './contract/callback-body.ts';
import { EVIDENCE_CAPS } from './contract/evidence-caps.ts';
import { hasControlChars, PinnedDir } from '../platform/files/pinned-dir.ts';
import { resolvedRoot } from './project-paths.ts';

const MAX_DEPTH = 8;
/** decision.json is a few hundred bytes; a bigger one is not read (the summary is cut at 2,000 characters anyway). */
const MAX_DECISION_BYTES = 64 * 1024;

/** A non-empty regular file below `dir`, checked on its one handle (platform/files/pinned-dir.ts). */
function isNonEmptyFile(dir: PinnedDir, rel: string): boolean {
  try {
    const file = dir.openFile(rel, EVIDENCE_CAPS.maxFileBytes);
    PinnedDir.release(file);
    return file.size > 0;
  } catch {
    return false;
  }
}

function readDecision(project: PinnedDir): { present: boolean; decision: string | null; summary: string | null } {
  let bytes: Buffer | null;
  try {
    bytes = project.readFileIfExists('.research/decision.json', MAX_DECISION_BYTES);
  } catch {
    bytes = null;
  }
  if (bytes === null) return { present: false, decision: null, summary: null };
  try {
    const parsed = JSON.parse(bytes.toString('utf8')) as { decision?: unknown; summary?: unknown };
    return {
      present: true,
      decision: typeof parsed.decision === 'string' ? parsed.decision : null,
      summary: typeof parsed.summary === 'string' ? parsed.summary.slice(0, 2000) : null,
    };
  } catch {
    return { present: true, decision: null, summary: null };
  }
}

/** Non-empty `results/**\/*.json` files, walked through pinned directories and stopped at the cap on entries. */
function countNonEmptyJson(project: PinnedDir): number {
  let count = 0;
  let entriesLeft = EVIDENCE_CAPS.maxEntriesVisited;
  const walk = (dir: PinnedDir, depth: number) => {
    if (depth > MAX_DEPTH) return;
    for (const entry of dir.entries(Math.max(0, entriesLeft)).entries) {
      if (--entriesLeft < 0 || hasControlChars(entry.name)) continue;
      if (entry.kind === 'dir') {
        let child: PinnedDir;
        try {
          child = dir.openDir(entry.name);
        } catch {
          continue;
        }
        try {
          walk(child, depth + 1);
        } finally {
          child.close();
        }
      } else if (entry.kind === 'file' && entry.name.endsWith('.json') && isNonEmptyFile(dir, entry.name)) count++;
    }
  };
  let results: PinnedDir;
  try {
    results = project.openDir('results');
  } catch {
    return 0;
  }
  try {
    walk(results, 0);
  } finally {
    results.close();
  }
  return count;
}

/**
 * What evidence the agent left in its project (docs/worker-gate.md#worker-gate), read when the gate reports readiness. The project
 * directory is pinned inside project_root and every file is opened once without following links (platform/files/pinned-dir.ts):
 * a file that links out of the project, or one swapped for a link meanwhile, counts as absent.
 */
export function inspectEvidence(projectRoot: string, projectDir: string): RunEvidence {
  let project: PinnedDir | null = null;
  try {
    const root = resolvedRoot(projectRoot);
    project = PinnedDir.open(root, relative(root, projectDir), { selfBoundary: true });
  } catch {
    project = null;
  }
  try {
    const decision = project ? readDecision(project) : { present: false, decision: null, summary: null };
    const facts = {
      run_notes: project ? isNonEmptyFile(project, 'run_notes.md') : false,
      decision_file: decision.present,
      decision: decision.decision,
      decision_summary: decision.summary,
      results_json_files: project ? countNonEmptyJson(project) : 0,
    };
    return { ...facts, sufficient_for_paper: hasPaperEvidence(facts) };
  } finally {
    project?.close();
  }
}
