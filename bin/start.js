// `npm start`'s entry point (README "Runtime"). Plain JavaScript: it decides how the TypeScript sources are loaded.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { homedir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SUPPORTED_MAJOR = 24;
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The service's own code; tests, benchmarks and scripts never run in it. */
const SOURCE_FOLDERS = ['api', 'http', 'services', 'clients', 'contracts', 'activities', 'workflows', 'worker-gate', 'domain', 'store', 'config', 'bin'];

if (Number(process.versions.node.split('.')[0]) < SUPPORTED_MAJOR) {
  console.error(
    `warning: Node ${process.version} is not the supported runtime; research-control-plane supports Node ${SUPPORTED_MAJOR} LTS (README "Runtime"). Starting anyway.`,
  );
}

if (process.features.typescript && typeof nodeModule.registerHooks === 'function') {
  loadStrippedSources();
} else {
  // tsx is a development dependency: production installs (`npm ci --omit=dev`, the image) run on Node 24 only.
  const tsx = await import('tsx/esm/api').catch(() => undefined);
  if (!tsx) {
    console.error(`research-control-plane: Node ${process.version} needs the tsx loader, a development dependency: run "npm ci" (not --omit=dev), or use Node ${SUPPORTED_MAJOR}.`);
    process.exit(1);
  }
  tsx.register();
}
await import('./control-plane.ts');

/**
 * Node strips TypeScript types itself, but the stripper it loads for that stays in memory (about 17 MiB, README
 * "Memory"). So the sources are stripped once per change by a short-lived child process into a cache, and this
 * process loads them from there; its modules keep their own URLs, so paths, `import.meta.url` and stack traces are
 * those of the sources.
 */
function loadStrippedSources() {
  const files = SOURCE_FOLDERS.flatMap((folder) => typeScriptFiles(join(REPO_ROOT, folder)));
  const hash = createHash('sha256').update(process.version);
  for (const file of files) hash.update(`\0${relative(REPO_ROOT, file)}\0`).update(readFileSync(file));
  const dir = join(cacheRoot(), 'stripped-sources', hash.digest('hex').slice(0, 32));
  if (!existsSync(dir)) stripInto(dir, files);

  const rootUrl = pathToFileURL(REPO_ROOT).href;
  nodeModule.registerHooks({
    load(url, context, nextLoad) {
      if (url.startsWith(rootUrl) && url.endsWith('.ts')) {
        const stripped = join(dir, relative(REPO_ROOT, fileURLToPath(url)));
        if (existsSync(stripped)) return { format: 'module', source: readFileSync(stripped, 'utf8'), shortCircuit: true };
      }
      return nextLoad(url, context);
    },
  });
}

function stripInto(dir, files) {
  const temporary = `${dir}.${process.pid}.tmp`;
  const script = `
    import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
    import { stripTypeScriptTypes } from 'node:module';
    import { dirname, join, relative } from 'node:path';
    const [root, out, ...files] = process.argv.slice(1);
    for (const file of files) {
      const target = join(out, relative(root, file));
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, stripTypeScriptTypes(readFileSync(file, 'utf8'), { mode: 'strip' }));
    }`;
  const result = spawnSync(process.execPath, ['--no-warnings', '--input-type=module', '-e', script, REPO_ROOT, temporary, ...files], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (result.status !== 0) throw new Error(`stripping the TypeScript sources failed (exit ${result.status ?? result.signal})`);
  try {
    renameSync(temporary, dir);
  } catch (error) {
    // Another process starting at the same moment stripped the same sources first.
    rmSync(temporary, { recursive: true, force: true });
    if (!existsSync(dir)) throw error;
  }
}

function typeScriptFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return typeScriptFiles(path);
    return entry.isFile() && entry.name.endsWith('.ts') ? [path] : [];
  });
}

/**
 * Where the Temporal CLI and the workflow bundle are cached too (bin/runtime/temporal-cli.ts). A copy, because this
 * file runs before any TypeScript module can be loaded.
 */
function cacheRoot() {
  const env = process.env;
  if (env.RCP_CACHE_DIR) return env.RCP_CACHE_DIR;
  return join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'research-control-plane');
}
