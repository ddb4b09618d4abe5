import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadWorkflowBundle } from '../../platform/temporal/workflow-bundle.ts';

/**
 * The cached workflow bundle is keyed by the files the bundler read, wherever they lie: a workflow's import from a
 * folder of any name is part of the key, and a tree left as it was reuses the bundle without bundling again.
 */

const NODE_MODULES = fileURLToPath(new URL('../../node_modules', import.meta.url));
const BUNDLING = /bundling the workflow code/;

/** A workflow entry whose workflow returns a value it imports from lib/, a folder outside workflows/ and domain/. */
function workflowTree(root: string): { entry: string; greeting: string } {
  mkdirSync(join(root, 'workflows'));
  mkdirSync(join(root, 'lib'));
  // The bundle's generated entry point imports the SDK from beside the workflows.
  symlinkSync(NODE_MODULES, join(root, 'node_modules'));
  const entry = join(root, 'workflows', 'index.ts');
  writeFileSync(entry, "import { GREETING } from '../lib/greeting.ts';\n\nexport async function greetingWorkflow(): Promise<string> {\n  return GREETING;\n}\n");
  const greeting = join(root, 'lib', 'greeting.ts');
  writeFileSync(greeting, "export const GREETING = 'first greeting';\n");
  return { entry, greeting };
}

async function load(options: { workflowsPath?: string; cacheDir?: string }): Promise<{ codePath: string; bundled: boolean }> {
  const messages: string[] = [];
  const { codePath } = await loadWorkflowBundle((message) => messages.push(message), options);
  return { codePath, bundled: messages.some((message) => BUNDLING.test(message)) };
}

describe('the workflow bundle cache', () => {
  const root = mkdtempSync(join(tmpdir(), 'rcp-workflow-bundle-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('bundles again when a file the workflows import from outside workflows/ and domain/ changes, and only then', { timeout: 120_000 }, async () => {
    const tree = workflowTree(root);
    const cacheDir = join(root, 'cache');

    const first = await load({ workflowsPath: tree.entry, cacheDir });
    expect(first.bundled).toBe(true);
    expect(readFileSync(first.codePath, 'utf8')).toContain('first greeting');

    const untouched = await load({ workflowsPath: tree.entry, cacheDir });
    expect(untouched, 'an untouched tree reuses the bundle').toStrictEqual({ codePath: first.codePath, bundled: false });

    writeFileSync(tree.greeting, "export const GREETING = 'second greeting';\n");
    const changed = await load({ workflowsPath: tree.entry, cacheDir });
    expect(changed.bundled, 'a changed import bundles again').toBe(true);
    expect(changed.codePath).not.toBe(first.codePath);
    expect(readFileSync(changed.codePath, 'utf8')).toContain('second greeting');
  });

  it("reuses the repository's bundle, which the test run's setup built, without bundling", async () => {
    expect((await load({})).bundled).toBe(false);
  });
});
