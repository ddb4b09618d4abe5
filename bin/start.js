// `npm start`'s entry point (docs/getting-started.md#runtime). Plain JavaScript: it decides how the TypeScript sources are loaded.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { homedir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { initialize, load } from './stripped-sources-hook.js';

const SUPPORTED_MAJOR = 24;
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The service's own code; tests, benchmarks and scripts never run in it. */
const SOURCE_FOLDERS = ['api', 'platform', 'capabilities', 'activities', 'workflows', 'worker-gate', 'bin'];

if (Number(process.versions.node.split('.')[0]) < SUPPORTED_MAJOR) {
  console.error(
    `warning: Node ${process.version} is not the supported runtime; research-control-plane supports Node ${SUPPORTED_MAJOR} LTS (docs/getting-started.md#runtime). Starting anyway.`,
  );
}

const nodeStripsTypes = Boolean(process.features.typescript) && typeof nodeModule.registerHooks === 'function';
loadStrippedSources(nodeStripsTypes ? nodeStripper() : esbuildStripper());
await import('./control-plane.ts');

/**
 * Neither path loads a TypeScript loader into this process: Node's own stripper stays in memory once loaded (about
 * 17 MiB), and tsx cost about 25 MiB and close to a second of CPU at every start (docs/testing.md#memory). So a short-lived
 * child process strips the sources once per change into a cache, and this process loads them from there through a
 * module hook; modules keep their sources' URLs, so paths and `import.meta.url` are those of the sources. Node 24
 * strips in place (line and column numbers unchanged); older Node has esbuild, a development dependency, transpile.
 */
function loadStrippedSources(stripper) {
  const files = SOURCE_FOLDERS.flatMap((folder) => typeScriptFiles(join(REPO_ROOT, folder)));
  const hash = createHash('sha256').update(`${process.version}\0${stripper.name}`);
  for (const file of files) hash.update(`\0${relative(REPO_ROOT, file)}\0`).update(readFileSync(file));
  const dir = join(cacheRoot(), 'stripped-sources', hash.digest('hex').slice(0, 32));
  if (!existsSync(dir)) stripInto(dir, files, stripper);

  const data = { root: REPO_ROOT, dir };
  if (nodeStripsTypes) {
    initialize(data);
    nodeModule.registerHooks({ load });
  } else {
    // Older Node has only the asynchronous hooks, which run on a thread of their own and get their state as data.
    nodeModule.register('./stripped-sources-hook.js', import.meta.url, { data });
  }
}

function nodeStripper() {
  return {
    name: 'node',
    args: ['--no-warnings', '--input-type=module', '-e', `
      import { stripTypeScriptTypes } from 'node:module';
      import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
      import { dirname, join, relative } from 'node:path';
      const [root, out, ...files] = process.argv.slice(1);
      for (const file of files) {
        const target = join(out, relative(root, file));
        mkdirSync(dirname(target), { recursive: true });
        writeFileSync(target, stripTypeScriptTypes(readFileSync(file, 'utf8'), { mode: 'strip' }));
      }`],
  };
}

function esbuildStripper() {
  let esbuildPath;
  try {
    esbuildPath = nodeModule.createRequire(import.meta.url).resolve('esbuild');
  } catch {
    // esbuild is a development dependency: production installs (`npm ci --omit=dev`, the image) run on Node 24 only.
    console.error(`research-control-plane: Node ${process.version} needs esbuild, a development dependency: run "npm ci" (not --omit=dev), or use Node ${SUPPORTED_MAJOR}.`);
    process.exit(1);
  }
  return {
    name: 'esbuild',
    args: ['-e', `
      const { transformSync } = require(${JSON.stringify(esbuildPath)});
      const { mkdirSync, readFileSync, writeFileSync } = require('node:fs');
      const { dirname, join, relative } = require('node:path');
      const [root, out, ...files] = process.argv.slice(1);
      for (const file of files) {
        const target = join(out, relative(root, file));
        mkdirSync(dirname(target), { recursive: true });
        const { code } = transformSync(readFileSync(file, 'utf8'), { loader: 'ts', format: 'esm', target: 'node20', sourcefile: file });
        writeFileSync(target, code);
      }`],
  };
}

function stripInto(dir, files, stripper) {
  const temporary = `${dir}.${process.pid}.tmp`;
  const result = spawnSync(process.execPath, [...stripper.args, REPO_ROOT, temporary, ...files], { stdio: ['ignore', 'ignore', 'inherit'] });
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
 * Where the Temporal CLI and the workflow bundle are cached too (platform/temporal/temporal-cli.ts). A copy, because this
 * file runs before any TypeScript module can be loaded.
 */
function cacheRoot() {
  const env = process.env;
  if (env.RCP_CACHE_DIR) return env.RCP_CACHE_DIR;
  return join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'research-control-plane');
}
