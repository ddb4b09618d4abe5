import { createHash } from 'node:crypto';
import { z } from 'zod';
import { hasPaperEvidence } from '../../worker-gate/contract/callback-body.ts';
import type { DraftEvidence } from './domain/paper-draft.ts';
import type { SecretFinding } from './domain/evidence-secrets.ts';
import { EVIDENCE_CAPS } from '../../worker-gate/contract/evidence-caps.ts';
import { hasControlChars, PinnedDir, UnsafePathError } from '../../platform/files/pinned-dir.ts';
import { NotResultsJson, resultNumbers } from './result-numbers.ts';
import type { ServiceSecrets } from '../../platform/config/service-secrets.ts';

/**
 * A run's paper evidence as the control plane reads it: from its own copy of the project, `<project_root>/<project_dir>`
 * (the worker's directory itself when the gate runs on this machine, or what evidence sync copied). Evidence is
 * `run_notes.md` plus `.research/decision.json`, or `run_notes.md` plus non-empty `results/**\/*.json`.
 *
 * An agent writes these files, so they are read as docs/security.md#security-model says: the project directory is pinned once
 * (its real path inside project_root), every file is opened once through it (no link followed, one link only, a
 * regular file) and read from that handle, and the whole read is bounded by EVIDENCE_CAPS. A file that breaks a rule
 * counts as absent; evidence over a cap counts as missing.
 *
 * Every file is also searched, chunk by chunk as it streams, for this service's own secret values
 * (platform/config/service-secrets.ts): evidence holding one is not complete, whatever else it holds, and `secrets` names
 * the files and which secrets, so a step can refuse and hold the paper for a person.
 */

export const EVIDENCE_FILES = { notes: 'run_notes.md', decision: '.research/decision.json', results: 'results' } as const;

export interface EvidenceCheck {
  /** Enough for a paper. */
  complete: boolean;
  /** The project copy the files were looked for in. */
  project_path: string;
  found: string[];
  /** What is missing, in words: empty when complete. */
  missing: string[];
}

/** One evidence file as read: its sha256 and size, and its bytes when the caller asked to keep them. */
export interface EvidenceFileRead {
  path: string;
  sha256: string;
  bytes: number;
  content?: Buffer;
}

export interface ReadEvidence extends EvidenceCheck {
  files: { run_notes: string | null; decision: { decision: string | null; summary: string | null } | null; results: { path: string; data: unknown }[] };
  /** sha256 over every evidence file read, in path order: what the draft was written from. */
  sha256: string;
  /** Each file read, in the order of `found`. */
  hashes: EvidenceFileRead[];
  /** The files holding secret values of this service; any makes the evidence incomplete. */
  secrets: SecretFinding[];
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

class OverCap extends Error {}

/** The evidence reading of one project: the pinned directory and what the caps have left. */
class EvidenceReader {
  private filesLeft = EVIDENCE_CAPS.maxFiles;
  private bytesLeft = EVIDENCE_CAPS.maxTotalBytes;
  private entriesLeft = EVIDENCE_CAPS.maxEntriesVisited;
  readonly taken: EvidenceFileRead[] = [];
  /** Evidence file → the secrets found in it. */
  readonly secretsIn = new Map<string, string[]>();
  /** Secrets found in the names of results files. */
  readonly secretsInNames: string[] = [];
  private readonly project: PinnedDir;
  private readonly keepBytes: boolean;
  private readonly secrets: ServiceSecrets;

  constructor(project: PinnedDir, keepBytes: boolean, secrets: ServiceSecrets) {
    this.project = project;
    this.keepBytes = keepBytes;
    this.secrets = secrets;
  }

  /** A file's bytes (or null when absent or refused), streamed from its one handle and counted against the caps. */
  async read(rel: string): Promise<Buffer | null> {
    if (rel.split('/').some(hasControlChars)) return null;
    let file;
    try {
      file = this.project.openFile(rel, EVIDENCE_CAPS.maxFileBytes);
    } catch (error) {
      if (error instanceof UnsafePathError && error.reason === 'too_large') throw new OverCap(error.message);
      return null;
    }
    if (file.size === 0) {
      PinnedDir.release(file);
      return null;
    }
    this.filesLeft -= 1;
    this.bytesLeft -= file.size;
    if (this.filesLeft < 0 || this.bytesLeft < 0) {
      PinnedDir.release(file);
      throw new OverCap(`more than ${EVIDENCE_CAPS.maxFiles} files or ${EVIDENCE_CAPS.maxTotalBytes} bytes`);
    }
    const chunks: Buffer[] = [];
    const hash = createHash('sha256');
    const scanner = this.secrets.scanner();
    await PinnedDir.streamFile(file, (chunk) => {
      hash.update(chunk);
      scanner.feed(chunk);
      chunks.push(chunk);
    });
    const bytes = Buffer.concat(chunks);
    const found = scanner.labels();
    if (found.length > 0) this.secretsIn.set(rel, found);
    this.taken.push({ path: rel, sha256: hash.digest('hex'), bytes: bytes.length, ...(this.keepBytes ? { content: bytes } : {}) });
    return bytes;
  }

  /** `results/**\/*.json`, sorted, depth-limited; entries beyond the cap make the evidence over the cap. */
  resultFiles(): string[] {
    const found: string[] = [];
    const walk = (rel: string, depth: number) => {
      if (depth > EVIDENCE_CAPS.maxDepth) return;
      let dir: PinnedDir;
      try {
        dir = this.project.openDir(rel);
      } catch {
        return;
      }
      try {
        const { entries, truncated } = dir.entries(this.entriesLeft);
        this.entriesLeft -= entries.length;
        if (truncated) throw new OverCap(`more than ${EVIDENCE_CAPS.maxEntriesVisited} entries under ${EVIDENCE_FILES.results}/`);
        for (const entry of entries) {
          if (hasControlChars(entry.name)) continue;
          const child = `${rel}/${entry.name}`;
          if (entry.kind === 'dir') walk(child, depth + 1);
          else if (entry.kind === 'file' && entry.name.endsWith('.json')) {
            // A name is shown wherever the file is (answers, the draft, the manifest): one holding a secret is no
            // evidence, and the finding does not repeat the name.
            const inName = this.secrets.find(child);
            if (inName.length > 0) this.secretsInNames.push(...inName);
            else found.push(child);
          }
        }
      } finally {
        dir.close();
      }
    };
    walk(EVIDENCE_FILES.results, 0);
    if (found.length > EVIDENCE_CAPS.maxFiles) throw new OverCap(`more than ${EVIDENCE_CAPS.maxFiles} results files`);
    return found;
  }
}

const noFiles = { run_notes: null, decision: null, results: [] };

/** What `missing` says of evidence holding secrets: the files, never the values. */
export const secretsMissingReason = (findings: readonly SecretFinding[]) =>
  `the evidence holds secret values of this service, in ${findings.map((finding) => JSON.stringify(finding.file)).join(', ')}`;
const MISSING_ALL = [`${EVIDENCE_FILES.notes} (absent or empty)`, `${EVIDENCE_FILES.decision} or a non-empty ${EVIDENCE_FILES.results}/**/*.json`];

/**
 * Reads every evidence file of the project copy; `complete` says whether they are enough for a paper. With
 * `keepBytes`, each file's bytes are kept in `hashes` (packaging copies exactly what it read).
 */
export async function readEvidence(projectRoot: string, projectDir: string, options: { keepBytes?: boolean; secrets: ServiceSecrets }): Promise<ReadEvidence> {
  const refused = (projectPath: string, why: string): ReadEvidence => ({ complete: false, project_path: projectPath, found: [], missing: [why], files: noFiles, sha256: '', hashes: [], secrets: [] });
  let project: PinnedDir;
  try {
    project = PinnedDir.open(projectRoot, projectDir, { selfBoundary: true });
  } catch (error) {
    if (error instanceof UnsafePathError) return refused(projectDir, `project_dir ${projectDir} leads out of project_root`);
    // A project not copied here yet misses every file.
    return { ...refused(projectDir, `${EVIDENCE_FILES.notes} (absent or empty)`), missing: MISSING_ALL };
  }
  const reader = new EvidenceReader(project, options.keepBytes ?? false, options.secrets);
  try {
    const notes = await reader.read(EVIDENCE_FILES.notes);
    const decisionBytes = await reader.read(EVIDENCE_FILES.decision);
    const results: { path: string; data: unknown }[] = [];
    const budget = { left: EVIDENCE_CAPS.maxResultValues };
    for (const rel of reader.resultFiles()) {
      const bytes = await reader.read(rel);
      if (!bytes) continue;
      try {
        results.push({ path: rel, data: resultNumbers(bytes, budget) ?? null });
      } catch (error) {
        if (!(error instanceof NotResultsJson)) throw error;
        // A results file that is not JSON is not evidence.
        reader.taken.pop();
      }
    }
    // Only files that are evidence count: a results file that is not JSON reaches no writer and no package.
    const secrets = reader.taken.flatMap((file) => (reader.secretsIn.has(file.path) ? [{ file: file.path, secrets: reader.secretsIn.get(file.path)! }] : []));
    if (reader.secretsInNames.length > 0) secrets.push({ file: `the name of a file under ${EVIDENCE_FILES.results}/`, secrets: [...new Set(reader.secretsInNames)].sort() });
    const enough = hasPaperEvidence({ run_notes: notes !== null, decision_file: decisionBytes !== null, results_json_files: results.length });
    const complete = enough && secrets.length === 0;
    const missing = [...MISSING_ALL.filter((_, index) => (index === 0 ? !notes : !decisionBytes && results.length === 0)), ...(secrets.length > 0 ? [secretsMissingReason(secrets)] : [])];
    const hash = createHash('sha256');
    for (const file of reader.taken) hash.update(`${file.path}\0${file.bytes}\0`).update(file.sha256);
    return {
      complete,
      project_path: project.path,
      found: reader.taken.map((file) => file.path),
      missing: complete ? [] : missing,
      files: { run_notes: notes?.toString('utf8') ?? null, decision: decisionBytes ? parseDecision(decisionBytes) : null, results },
      sha256: hash.digest('hex'),
      hashes: reader.taken,
      secrets,
    };
  } catch (error) {
    if (error instanceof OverCap) return refused(project.path, `the evidence is over its cap (${error.message}): it counts as missing`);
    throw error;
  } finally {
    project.close();
  }
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

/** The evidence hashes a draft record holds in `evidence_summary.file_hashes` (activities/papers/paper-activities.ts writes them). */
export const RecordedHashesSchema = z.array(z.object({ path: z.string(), sha256: z.string(), bytes: z.number() }));

/**
 * The first way the evidence read now differs from the hashes a draft record holds (a file changed, gone or added),
 * in words naming the file; null when it is exactly what the draft was written from.
 */
export function evidenceChangeSince(recorded: readonly Pick<EvidenceFileRead, 'path' | 'sha256'>[], current: readonly EvidenceFileRead[]): string | null {
  const now = new Map(current.map((file) => [file.path, file]));
  for (const file of recorded) {
    const found = now.get(file.path);
    if (!found) return `the evidence file ${JSON.stringify(file.path)} is gone since the draft was written`;
    if (found.sha256 !== file.sha256) return `the evidence file ${JSON.stringify(file.path)} changed since the draft was written`;
  }
  const known = new Set(recorded.map((file) => file.path));
  const added = current.find((file) => !known.has(file.path));
  return added ? `the evidence file ${JSON.stringify(added.path)} appeared since the draft was written` : null;
}
