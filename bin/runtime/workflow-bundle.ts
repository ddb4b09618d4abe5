import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { cacheRoot } from './temporal-cli.ts';

/**
 * The workflow bundle the Temporal worker runs. Bundling takes seconds, so the code is cached by a hash of the
 * workflow and domain sources plus the SDK version: a restart with unchanged code starts at once.
 */

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const WORKFLOWS_ENTRY = join(REPO_ROOT, 'workflows', 'index.ts');
/** The workflow interceptors (request ids), bundled with the workflows. */
const WORKFLOW_INTERCEPTORS = join(REPO_ROOT, 'workflows', 'interceptors.ts');
/** Folders whose code can end up in the bundle (workflows import domain rules as values, everything else as types). */
const BUNDLED_FOLDERS = ['workflows', 'domain'];

function sourceHash(extraModules: readonly string[]): string {
  const hash = createHash('sha256');
  for (const module of extraModules) hash.update(`module ${module}\n`);
  const sdkVersion = (createRequire(import.meta.url)('@temporalio/workflow/package.json') as { version: string }).version;
  hash.update(`sdk ${sdkVersion}\n`);
  for (const folder of BUNDLED_FOLDERS) {
    const dir = join(REPO_ROOT, folder);
    for (const name of readdirSync(dir).filter((file) => file.endsWith('.ts')).sort()) {
      hash.update(`${folder}/${name}\n`).update(readFileSync(join(dir, name)));
    }
  }
  return hash.digest('hex').slice(0, 32);
}

/**
 * The cached bundle's path; `interceptorModules` are bundled beside this repository's own (tracing's, when it is on). The worker reads the file itself, so the code is held once (by the compiled workflow
 * script) rather than also as a string in this process.
 */
export async function loadWorkflowBundle(progress: (message: string) => void = () => undefined, options: { interceptorModules?: readonly string[] } = {}): Promise<{ codePath: string }> {
  const extraModules = options.interceptorModules ?? [];
  const dir = join(cacheRoot(), 'workflow-bundles');
  const codePath = join(dir, `${sourceHash(extraModules)}.js`);
  if (existsSync(codePath)) return { codePath };
  progress('bundling the workflow code (once per code change, a few seconds)');
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_ENTRY, workflowInterceptorModules: [WORKFLOW_INTERCEPTORS, ...extraModules], logger: quietBundlerLogger });
  mkdirSync(dir, { recursive: true });
  const temporary = `${codePath}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(temporary, code);
  renameSync(temporary, codePath);
  return { codePath };
}

const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string, meta?: Record<string, unknown>) => console.warn(message, meta ?? ''),
  error: (message: string, meta?: Record<string, unknown>) => console.error(message, meta ?? ''),
};
