import { createHash } from 'node:crypto';
import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { hasPaperEvidence } from '../contracts/worker-callback.ts';
import type { DraftEvidence } from '../domain/paper-draft.ts';

/**
 * A run's paper evidence as the control plane reads it: from its own copy of the project, `<project_root>/<project_dir>`
 * (the worker's directory itself when the gate runs on this machine, or what evidence sync copied). Evidence is
 * `run_notes.md` plus `.research/decision.json`, or `run_notes.md` plus non-empty `results/**\/*.json`. A file that
 * leads out of the project (a symbolic link) counts as absent.
 */

export const EVIDENCE_FILES = { notes: 'run_notes.md', decision: '.research/decision.json', results: 'results' } as const;

const MAX_RESULT_FILES = 500;
const MAX_RESULT_DEPTH = 8;
const MAX_FILE_BYTES = 5 * 1024 * 1024;

export interface EvidenceCheck {
  /** Enough for a paper. */
  complete: boolean;
  /** The project copy the files were looked for in. */
  project_path: string;
  found: string[];
  /** What is missing, in words: empty when complete. */
  missing: string[];
}

export interface ReadEvidence extends EvidenceCheck {
  files: { run_notes: string | null; decision: { decision: string | null; summary: string | null } | null; results: { path: string; data: unknown }[] };
  /** sha256 over every evidence file read, in path order: what the draft was written from. */
  sha256: string;
}

const inside = (parent: string, child: string) => {
  const rel = relative(parent, child);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
};

/** The project's directory under project_root, or null when project_dir would lead out of it. */
export function projectPath(projectRoot: string, projectDir: string): string | null {
  const root = resolve(projectRoot);
  const path = resolve(root, projectDir);
  return inside(root, path) ? path : null;
}

async function readInside(project: string, rel: string): Promise<Buffer | null> {
  try {
    const real = await realpath(join(project, rel));
    if (!inside(await realpath(project), real)) return null;
    const info = await stat(real);
    if (!info.isFile() || info.size === 0 || info.size > MAX_FILE_BYTES) return null;
    return await readFile(real);
  } catch {
    return null;
  }
}

async function resultFiles(project: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (rel: string, depth: number) => {
    if (depth > MAX_RESULT_DEPTH || found.length >= MAX_RESULT_FILES) return;
    let entries;
    try {
      entries = await readdir(join(project, rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const child = `${rel}/${entry.name}`;
      if (entry.isDirectory()) await walk(child, depth + 1);
      else if (entry.isFile() && entry.name.endsWith('.json') && found.length < MAX_RESULT_FILES) found.push(child);
    }
  };
  await walk(EVIDENCE_FILES.results, 0);
  return found;
}

function parseDecision(bytes: Buffer): { decision: string | null; summary: string | null } {
  try {
    const parsed = JSON.parse(bytes.toString('utf8')) as { decision?: unknown; summary?: unknown };
    return {
      decision: typeof parsed.decision === 'string' ? parsed.decision : null,
      summary: typeof parsed.summary === 'string' ? parsed.summary.slice(0, 2000) : null,
    };
  } catch {
    return { decision: null, summary: null };
  }
}

/** Reads every evidence file of the project copy; `complete` says whether they are enough for a paper. */
export async function readEvidence(projectRoot: string, projectDir: string): Promise<ReadEvidence> {
  const project = projectPath(projectRoot, projectDir);
  const none = { run_notes: null, decision: null, results: [] };
  if (project === null) {
    return { complete: false, project_path: projectDir, found: [], missing: [`project_dir ${projectDir} leads out of project_root`], files: none, sha256: '' };
  }
  const hash = createHash('sha256');
  const found: string[] = [];
  const take = (rel: string, bytes: Buffer) => {
    found.push(rel);
    hash.update(`${rel}\0${bytes.length}\0`).update(bytes);
  };
  const notes = await readInside(project, EVIDENCE_FILES.notes);
  if (notes) take(EVIDENCE_FILES.notes, notes);
  const decisionBytes = await readInside(project, EVIDENCE_FILES.decision);
  if (decisionBytes) take(EVIDENCE_FILES.decision, decisionBytes);
  const results: { path: string; data: unknown }[] = [];
  for (const rel of await resultFiles(project)) {
    const bytes = await readInside(project, rel);
    if (!bytes) continue;
    try {
      results.push({ path: rel, data: JSON.parse(bytes.toString('utf8')) });
      take(rel, bytes);
    } catch {
      // A results file that is not JSON is not evidence.
    }
  }
  const complete = hasPaperEvidence({ run_notes: notes !== null, decision_file: decisionBytes !== null, results_json_files: results.length });
  const missing: string[] = [];
  if (!notes) missing.push(`${EVIDENCE_FILES.notes} (absent or empty)`);
  if (!decisionBytes && results.length === 0) missing.push(`${EVIDENCE_FILES.decision} or a non-empty ${EVIDENCE_FILES.results}/**/*.json`);
  return {
    complete,
    project_path: project,
    found,
    missing: complete ? [] : missing,
    files: { run_notes: notes?.toString('utf8') ?? null, decision: decisionBytes ? parseDecision(decisionBytes) : null, results },
    sha256: hash.digest('hex'),
  };
}

/** What the writers are given: the evidence files, with the decision as the gate recorded it when the file lacks one. */
export function draftEvidenceOf(
  read: ReadEvidence,
  run: { project_id: string; project_name: string; run_id: string; finished_at: string | null; decision: string | null; decision_summary: string | null },
): DraftEvidence {
  return {
    project_id: run.project_id,
    project_name: run.project_name,
    run_id: run.run_id,
    finished_at: run.finished_at,
    decision: read.files.decision?.decision ?? run.decision,
    decision_summary: read.files.decision?.summary ?? run.decision_summary,
    run_notes: read.files.run_notes ?? '',
    results: read.files.results,
  };
}
