import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { HttpError } from '../http/errors.ts';
import type { PrepareProjectRequest } from '../contracts/worker-gate.ts';
import { writeJsonAtomic, writeTextAtomic } from './json-files.ts';
import { resolvedRoot, resolveProjectPaths, staysInsideRoot } from './project-paths.ts';

export const PROJECT_META_DIR = '.research';

export interface ProjectJson {
  run_id: string;
  project_id: string;
  project_name: string;
  workload_class: string | null;
  machine_target: string | null;
  prompt_file: string;
  prepared_at: string;
}

export interface PrepareResult {
  ok: true;
  run_id: string;
  project_id: string;
  project_dir: string;
  prompt_file: string;
  project_json: string;
  /** False when the same run was already prepared with the same prompt (a retried call). */
  created: boolean;
  overwritten: boolean;
}

function readIfExists(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

function previousRunId(projectJsonText: string | null): string | null {
  if (projectJsonText === null) return null;
  try {
    const parsed = JSON.parse(projectJsonText) as { run_id?: unknown };
    return typeof parsed.run_id === 'string' ? parsed.run_id : null;
  } catch {
    return null;
  }
}

/** File-system refusals a client's paths can cause: its request, not the gate, is at fault (400, never 500). */
const CLIENT_PATH_ERRORS = new Set(['ENAMETOOLONG', 'ENOENT', 'ENOTDIR', 'EISDIR', 'ELOOP', 'EEXIST']);

function asClientError(error: unknown): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  return code !== undefined && CLIENT_PATH_ERRORS.has(code) ? new HttpError(400, `cannot write the project files: ${code}`) : error;
}

/**
 * Creates the workspace for a run: the project directory, the prompt file and `.research/project.json`.
 * Preparing the same run again with the same prompt is a no-op, so the control plane may retry it.
 * Every path read or written is checked against project_root with symbolic links followed, before and again after
 * the directories are created, so a link planted in the project (`.research -> /elsewhere`) is refused (400).
 */
export function prepareProject(projectRoot: string, request: PrepareProjectRequest): PrepareResult {
  try {
    return prepareInsideRoot(projectRoot, request);
  } catch (error) {
    throw asClientError(error);
  }
}

function prepareInsideRoot(projectRoot: string, request: PrepareProjectRequest): PrepareResult {
  const resolved = resolveProjectPaths(projectRoot, request.project_dir, request.prompt_file);
  if (!resolved.ok) throw new HttpError(400, resolved.reason);
  const { projectDir, promptFile } = resolved.paths;
  const metaDir = join(projectDir, PROJECT_META_DIR);
  const projectJsonPath = join(metaDir, 'project.json');
  const root = resolvedRoot(projectRoot);
  const mustStayInside = (path: string, what: string) => {
    if (!staysInsideRoot(root, path)) throw new HttpError(400, `${what} escapes project_root through a symbolic link`);
  };
  mustStayInside(metaDir, PROJECT_META_DIR);
  mustStayInside(projectJsonPath, `${PROJECT_META_DIR}/project.json`);

  const existingPrompt = readIfExists(promptFile);
  const existingProjectJson = readIfExists(projectJsonPath);
  const sameRunAgain = previousRunId(existingProjectJson) === request.run_id && existingPrompt === request.prompt_text;
  const result: PrepareResult = {
    ok: true,
    run_id: request.run_id,
    project_id: request.project_id,
    project_dir: projectDir,
    prompt_file: promptFile,
    project_json: projectJsonPath,
    created: false,
    overwritten: false,
  };
  if (sameRunAgain) return result;

  const existing = [existingPrompt !== null ? promptFile : null, existingProjectJson !== null ? projectJsonPath : null].filter(
    (path): path is string => path !== null,
  );
  if (existing.length > 0 && !request.overwrite) {
    throw new HttpError(409, `${existing.join(' and ')} already exist${existing.length === 1 ? 's' : ''}; send overwrite true to replace`);
  }

  mkdirSync(dirname(promptFile), { recursive: true });
  mkdirSync(metaDir, { recursive: true });
  // Again now that the directories exist: one may have been swapped for a link since the first check.
  mustStayInside(dirname(promptFile), 'prompt_file');
  mustStayInside(promptFile, 'prompt_file');
  mustStayInside(projectJsonPath, `${PROJECT_META_DIR}/project.json`);
  writeTextAtomic(promptFile, request.prompt_text, 0o644);
  const projectJson: ProjectJson = {
    run_id: request.run_id,
    project_id: request.project_id,
    project_name: request.project_name ?? request.project_id,
    workload_class: request.workload_class ?? null,
    machine_target: request.machine_target ?? null,
    prompt_file: promptFile,
    prepared_at: new Date().toISOString(),
  };
  writeJsonAtomic(projectJsonPath, projectJson);
  return { ...result, created: true, overwritten: existing.length > 0 };
}
