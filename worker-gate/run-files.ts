import { createHash } from 'node:crypto';
import { relative } from 'node:path';
import { EVIDENCE_CAPS } from './contract/evidence-caps.ts';
import {
  DECISION_FILE,
  isResultPath,
  mediaTypeOf,
  RESULT_FILE_CAPS,
  RESULTS_DIR,
  RUN_NOTES_FILE,
  type RunFile,
  type RunFileContent,
  type RunFiles,
} from './contract/run-files.ts';
import { resolvedRoot } from './project-paths.ts';
import { hasControlChars, PinnedDir, UnsafePathError, type PinnedFile } from '../platform/files/pinned-dir.ts';
import { HttpError } from '../platform/http/errors.ts';

/**
 * A run's result files, read from its project on this worker (docs/worker-gate.md#a-runs-result-files). The agent wrote
 * them and may still write: the project is pinned inside project_root, each file is opened once without following a
 * link and read from that handle only up to the size it had when opened, and every listing and preview is bounded.
 */

/** Bytes hashed for one listing, all files together; files past it are listed without their hash. */
const LISTING_HASH_BUDGET = 256 * 1024 * 1024;
const NO_SIZE_LIMIT = Number.MAX_SAFE_INTEGER;

function pinnedProject(projectRoot: string, projectDir: string): PinnedDir {
  try {
    const root = resolvedRoot(projectRoot);
    return PinnedDir.open(root, relative(root, projectDir), { selfBoundary: true });
  } catch {
    throw new HttpError(404, `the run's project directory ${projectDir} is not on this worker any more`);
  }
}

/** Opens a result file once, whatever its size; refused as platform/files/pinned-dir.ts refuses. */
const openResult = (project: PinnedDir, path: string): PinnedFile => project.openFile(path, NO_SIZE_LIMIT);

async function describe(project: PinnedDir, path: string, budget: { left: number }): Promise<RunFile> {
  const file = openResult(project, path);
  const hashed = file.size <= RESULT_FILE_CAPS.hashFileBytes && file.size <= budget.left;
  const hash = createHash('sha256');
  if (hashed) {
    budget.left -= file.size;
    await PinnedDir.streamFile(file, (chunk) => hash.update(chunk));
  } else PinnedDir.release(file);
  return { path, size: file.size, sha256: hashed ? hash.digest('hex') : null, ...mediaTypeOf(path) };
}

/** The paths under results/, walked through pinned directories within the bounds of a project's evidence. */
function resultPaths(project: PinnedDir): { paths: string[]; truncated: boolean; refused: { path: string; reason: string }[] } {
  const paths: string[] = [];
  const refused: { path: string; reason: string }[] = [];
  let truncated = false;
  let entriesLeft = EVIDENCE_CAPS.maxEntriesVisited;
  const walk = (dir: PinnedDir, prefix: string, depth: number) => {
    const listed = dir.entries(Math.max(0, entriesLeft));
    if (listed.truncated) truncated = true;
    for (const entry of listed.entries) {
      entriesLeft -= 1;
      const path = `${prefix}/${entry.name}`;
      if (hasControlChars(entry.name)) {
        refused.push({ path: JSON.stringify(path), reason: 'its name holds control characters' });
      } else if (entry.kind === 'dir') {
        if (depth >= EVIDENCE_CAPS.maxDepth) {
          truncated = true;
          continue;
        }
        let child: PinnedDir;
        try {
          child = dir.openDir(entry.name);
        } catch (error) {
          refused.push({ path, reason: error instanceof Error ? error.message : String(error) });
          continue;
        }
        try {
          walk(child, path, depth + 1);
        } finally {
          child.close();
        }
      } else if (paths.length >= EVIDENCE_CAPS.maxFiles) truncated = true;
      else paths.push(path);
    }
  };
  let results: PinnedDir;
  try {
    results = project.openDir(RESULTS_DIR);
  } catch {
    return { paths, truncated, refused };
  }
  try {
    walk(results, RESULTS_DIR, 1);
  } finally {
    results.close();
  }
  return { paths, truncated, refused };
}

export async function listRunFiles(projectRoot: string, run: { run_id: string; project_dir: string }): Promise<RunFiles> {
  const project = pinnedProject(projectRoot, run.project_dir);
  try {
    const walked = resultPaths(project);
    const budget = { left: LISTING_HASH_BUDGET };
    const files: RunFile[] = [];
    const refused = [...walked.refused];
    for (const path of [RUN_NOTES_FILE, DECISION_FILE, ...walked.paths]) {
      try {
        files.push(await describe(project, path, budget));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        refused.push({ path, reason: error instanceof UnsafePathError ? error.message : `it could not be read (${(error as NodeJS.ErrnoException).code ?? 'error'})` });
      }
    }
    return { run_id: run.run_id, project_dir: run.project_dir, files, truncated: walked.truncated, refused };
  } finally {
    project.close();
  }
}

/** One result file with its preview: text cut at the cap, an image's bytes whole when small enough, else no content. */
export async function readRunFile(projectRoot: string, run: { project_dir: string }, path: string): Promise<RunFileContent> {
  if (!isResultPath(path)) throw new HttpError(404, `${path} is not a result file: only ${RUN_NOTES_FILE}, ${DECISION_FILE} and files under ${RESULTS_DIR}/ are served`);
  const project = pinnedProject(projectRoot, run.project_dir);
  let file: PinnedFile;
  try {
    file = openResult(project, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new HttpError(404, `${path} does not exist in the run's project`);
    if (error instanceof UnsafePathError) throw new HttpError(error.reason === 'bad_name' ? 400 : 409, `${path} is not served: ${error.message}`);
    throw error;
  } finally {
    project.close();
  }
  const type = mediaTypeOf(path);
  const hashed = file.size <= RESULT_FILE_CAPS.hashFileBytes;
  const keep = type.preview === 'image' ? (file.size <= RESULT_FILE_CAPS.previewImageBytes ? file.size : 0) : type.preview === 'none' ? 0 : RESULT_FILE_CAPS.previewTextBytes;
  const hash = createHash('sha256');
  const kept: Buffer[] = [];
  let keptBytes = 0;
  await PinnedDir.streamFile(file, (chunk) => {
    if (hashed) hash.update(chunk);
    if (keptBytes < keep) {
      const part = chunk.subarray(0, keep - keptBytes);
      kept.push(part);
      keptBytes += part.length;
    }
  }, hashed ? file.size : keep);
  const bytes = Buffer.concat(kept);
  const base = { path, size: file.size, sha256: hashed ? hash.digest('hex') : null, ...type };
  if (type.preview === 'none') return { ...base, encoding: 'utf8', content: null, truncated: false };
  if (type.preview === 'image') return { ...base, encoding: 'base64', content: keep > 0 ? bytes.toString('base64') : null, truncated: keep === 0 };
  // Cut at a byte count: a character split there reads as U+FFFD, never as an error.
  return { ...base, encoding: 'utf8', content: new TextDecoder('utf-8', { fatal: false }).decode(bytes), truncated: file.size > keep };
}
