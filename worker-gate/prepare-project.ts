import { basename, dirname, join, relative } from 'node:path';
import { HttpError } from '../platform/http/errors.ts';
import type { PrepareProjectRequest } from './contract/gate-endpoints.ts';
import { PinnedDir, UnsafePathError } from '../platform/files/pinned-dir.ts';
import { resolvedRoot, resolveProjectPaths } from './project-paths.ts';

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
  if (error instanceof UnsafePathError) return new HttpError(400, error.message);
  const code = (error as NodeJS.ErrnoException).code;
  return code !== undefined && CLIENT_PATH_ERRORS.has(code) ? new HttpError(400, `cannot write the project files: ${code}`) : error;
}

/** The largest prompt or project.json read back to compare with a retried call; a bigger one is refused (400). */
const MAX_READ_BACK_BYTES = 16 * 1024 * 1024;

/**
 * Creates the workspace for a run: the project directory, the prompt file and `.research/project.json`.
 * Preparing the same run again with the same prompt is a no-op, so the control plane may retry it.
 * Each directory is opened once (platform/files/pinned-dir.ts: its real path inside project_root, checked on the handle) and
 * every read and write goes through that handle, so a link swapped in between (`.research -> /elsewhere`) can neither
 * carry a write out of project_root nor be raced: it is refused (400) or never seen.
 */
export function prepareProject(projectRoot: string, request: PrepareProjectRequest): PrepareResult {
  const opened: PinnedDir[] = [];
  try {
    return prepareInsideRoot(projectRoot, request, opened);
  } catch (error) {
    throw asClientError(error);
  } finally {
    for (const dir of opened) dir.close();
  }
}

function prepareInsideRoot(projectRoot: string, request: PrepareProjectRequest, opened: PinnedDir[]): PrepareResult {
  const resolved = resolveProjectPaths(projectRoot, request.project_dir, request.prompt_file);
  if (!resolved.ok) throw new HttpError(400, resolved.reason);
  const { projectDir, promptFile } = resolved.paths;
  const root = resolvedRoot(projectRoot);
  const pin = (dir: PinnedDir) => (opened.push(dir), dir);
  const project = pin(PinnedDir.open(root, relative(root, projectDir), { create: true }));
  const meta = pin(project.openDir(PROJECT_META_DIR, { create: true }));
  const promptDir = pin(PinnedDir.open(root, relative(root, dirname(promptFile)), { create: true }));
  const promptName = basename(promptFile);
  const metaPath = join(projectDir, PROJECT_META_DIR);
  const projectJsonPath = join(metaPath, 'project.json');

  const readBack = (dir: PinnedDir, name: string) => dir.readFileIfExists(name, MAX_READ_BACK_BYTES)?.toString('utf8') ?? null;
  const existingPrompt = readBack(promptDir, promptName);
  const existingProjectJson = readBack(meta, 'project.json');
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

  promptDir.writeFileAtomic(promptName, request.prompt_text, 0o644);
  const projectJson: ProjectJson = {
    run_id: request.run_id,
    project_id: request.project_id,
    project_name: request.project_name ?? request.project_id,
    workload_class: request.workload_class ?? null,
    machine_target: request.machine_target ?? null,
    prompt_file: promptFile,
    prepared_at: new Date().toISOString(),
  };
  meta.writeFileAtomic('project.json', `${JSON.stringify(projectJson, null, 2)}\n`, 0o600);
  return { ...result, created: true, overwritten: existing.length > 0 };
}
