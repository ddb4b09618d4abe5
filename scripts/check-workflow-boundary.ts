/**
 * Workflow code must be deterministic: it may not import Node built-ins, I/O libraries, or side-effecting project
 * modules (activities are imported as types only, through proxyActivities). Run: npm run lint
 */
import { builtinModules } from 'node:module';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface BoundaryViolation {
  file: string;
  line: number;
  specifier: string;
  reason: string;
}

const IO_PACKAGES = ['pg', '@electric-sql/pglite', 'fastify', 'pino', '@temporalio/client', '@temporalio/worker', '@temporalio/activity'];
const SIDE_EFFECT_FOLDERS = ['activities', 'store', 'api', 'bin', 'worker-gate', 'config'];
const BUILTINS = new Set(builtinModules);

const IMPORT_PATTERNS = [
  /^\s*(import|export)\s+(type\s+)?[^'";]*?\sfrom\s*['"]([^'"]+)['"]/gm,
  /^\s*import\s*()()['"]([^'"]+)['"]/gm,
  /()()\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  /()()\brequire\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
];

function reasonFor(specifier: string, typeOnly: boolean, fromFile: string, workflowsDir: string): string | undefined {
  const bare = specifier.startsWith('node:') ? specifier.slice(5) : specifier;
  if (specifier.startsWith('node:') || BUILTINS.has(bare.split('/')[0]!)) return 'Node built-in';
  if (IO_PACKAGES.some((name) => specifier === name || specifier.startsWith(`${name}/`))) return 'I/O library';
  if (!specifier.startsWith('.') || typeOnly) return undefined;
  const target = resolve(fromFile, '..', specifier);
  const projectRoot = resolve(workflowsDir, '..');
  const folder = relative(projectRoot, target).split(/[\\/]/)[0];
  if (folder && SIDE_EFFECT_FOLDERS.includes(folder)) return `value import from ${folder}/ (import types only)`;
  return undefined;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|mts|js|mjs)$/.test(name) ? [path] : [];
  });
}

export function findWorkflowBoundaryViolations(workflowsDir: string): BoundaryViolation[] {
  if (!existsSync(workflowsDir)) return [];
  return sourceFiles(workflowsDir).flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return IMPORT_PATTERNS.flatMap((pattern) =>
      [...text.matchAll(pattern)].flatMap((match) => {
        const specifier = match[3]!;
        const reason = reasonFor(specifier, Boolean(match[2]), file, workflowsDir);
        if (!reason) return [];
        const line = text.slice(0, match.index).split('\n').length + (match[0].startsWith('\n') ? 1 : 0);
        return [{ file: relative(process.cwd(), file), line, specifier, reason }];
      }),
    );
  });
}

const isMain = process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const dir = resolve(process.argv[2] ?? 'workflows');
  const violations = findWorkflowBoundaryViolations(dir);
  for (const v of violations) console.error(`${v.file}:${v.line}: '${v.specifier}' — ${v.reason}`);
  console.log(violations.length === 0 ? `workflow boundary ok (${dir})` : `${violations.length} workflow boundary violation(s)`);
  process.exit(violations.length === 0 ? 0 : 1);
}
