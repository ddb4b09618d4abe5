import { existsSync, readdirSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSwapper } from '../support/swapper.ts';
import { inspectEvidence } from '../../worker-gate/evidence.ts';
import { CallbackReceiver, gateClient, startGateProcess, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';

/**
 * The gate writes only inside project_root, whatever an agent planted in its project before the next prepare
 * (docs/security.md#security-model): links are planted on disk and the real gate process is asked to write through them.
 */

let receiver: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;
let outside: string;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  fixture = await writeGateConfig({ callbackUrl: receiver.url });
  gate = await startGateProcess(fixture);
  client = gateClient(fixture);
  outside = join(fixture.dir, 'outside');
});

afterAll(async () => {
  await gate?.kill('SIGTERM');
  await receiver?.down();
  if (fixture) await rm(fixture.dir, { recursive: true, force: true });
});

const ORIGINAL = '{"untouched":true}\n';

/** A fresh project directory and a fresh directory outside project_root holding one file. */
async function plant(name: string): Promise<{ project: string; away: string }> {
  const project = join(fixture.projectRoot, name);
  const away = join(outside, name);
  await mkdir(project, { recursive: true });
  await mkdir(away, { recursive: true });
  await writeFile(join(away, 'project.json'), ORIGINAL);
  return { project, away };
}

const prepare = (name: string, extra: Record<string, unknown> = {}) =>
  client.prepare({ run_id: `${name}-run`, project_id: name, project_dir: name, prompt_file: 'prompt.md', prompt_text: 'hello', overwrite: true, ...extra });

describe('prepare-project never writes through a link out of project_root', () => {
  it('refuses a .research that links out, and leaves the file there as it was', async () => {
    const { project, away } = await plant('linked-meta');
    await symlink(away, join(project, '.research'));
    const refused = await prepare('linked-meta');
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/\.research.*symbolic link/);
    expect(await readFile(join(away, 'project.json'), 'utf8')).toBe(ORIGINAL);
    expect(readdirSync(away)).toEqual(['project.json']);
  });

  it('refuses a .research that links to a place that does not exist yet, creating nothing there', async () => {
    const { project, away } = await plant('dangling-meta');
    await symlink(join(away, 'not-yet'), join(project, '.research'));
    expect((await prepare('dangling-meta')).status).toBe(400);
    expect(existsSync(join(away, 'not-yet'))).toBe(false);
  });

  it('refuses a project.json that links out', async () => {
    const { project, away } = await plant('linked-json');
    await mkdir(join(project, '.research'));
    await symlink(join(away, 'project.json'), join(project, '.research', 'project.json'));
    expect((await prepare('linked-json')).status).toBe(400);
    expect(await readFile(join(away, 'project.json'), 'utf8')).toBe(ORIGINAL);
  });

  it('refuses a prompt file, or a directory on its way, that links out', async () => {
    const { project, away } = await plant('linked-prompt');
    await symlink(join(away, 'project.json'), join(project, 'prompt.md'));
    await symlink(away, join(project, 'notes'));
    expect((await prepare('linked-prompt')).status).toBe(400);
    expect((await prepare('linked-prompt', { prompt_file: 'notes/prompt.md' })).status).toBe(400);
    expect(await readFile(join(away, 'project.json'), 'utf8')).toBe(ORIGINAL);
    expect(readdirSync(away)).toEqual(['project.json']);
  });

  it('refuses a project directory that is itself a link out', async () => {
    const { away } = await plant('linked-dir-target');
    await symlink(away, join(fixture.projectRoot, 'linked-dir'));
    expect((await prepare('linked-dir')).status).toBe(400);
    expect(readdirSync(away)).toEqual(['project.json']);
  });

  it('still prepares an ordinary project, links inside the project included', async () => {
    const { project } = await plant('ordinary');
    await mkdir(join(project, 'real-meta'));
    await symlink(join(project, 'real-meta'), join(project, '.research'));
    const prepared = await prepare('ordinary');
    expect(prepared.status, JSON.stringify(prepared.body)).toBe(200);
    expect(JSON.parse(await readFile(join(project, 'real-meta', 'project.json'), 'utf8'))).toMatchObject({ run_id: 'ordinary-run' });
  });
});

describe('M3: prepare-project under a .research swapped for a link in a loop', () => {
  it('writes nothing outside project_root during 200 prepares, and answers each 200 or 400', { timeout: 60_000 }, async () => {
    const { project, away } = await plant('racing-meta');
    const swapper = startSwapper(join(project, '.research'), { kind: 'dir', linkTo: away, durationMs: 30_000 });
    const statuses = new Set<number>();
    try {
      for (let i = 0; i < 200; i++) statuses.add((await prepare('racing-meta', { run_id: `racing-meta-${i}` })).status);
    } finally {
      await swapper.stop();
    }
    expect([...statuses].every((status) => status === 200 || status === 400), [...statuses].join()).toBe(true);
    expect(await readFile(join(away, 'project.json'), 'utf8')).toBe(ORIGINAL);
    expect(readdirSync(away)).toEqual(['project.json']);
  });
});

describe('paths that cannot be written answer 4xx, never 500', () => {
  it.each([
    ['a path part over 255 bytes: 422', { project_dir: `long/${'x'.repeat(300)}` }, 422],
    ['a prompt_file part over 255 bytes: 422', { prompt_file: `${'p'.repeat(256)}.md` }, 422],
    ['a NUL in project_dir: 422', { project_dir: 'nul\u0000dir' }, 422],
    ['a NUL in prompt_file: 422', { prompt_file: 'prompt\u0000.md' }, 422],
    ['a path over 4096 characters: 422', { project_dir: Array.from({ length: 20 }, () => 'd'.repeat(250)).join('/') }, 422],
  ])('%s', async (_name, change, status) => {
    const refused = await prepare('bad-paths', change);
    expect(refused.status).toBe(status);
    expect(refused.body.detail).toBeDefined();
  });

  it('a prompt_file that is a directory, or a project_dir under a file: 400', async () => {
    const { project } = await plant('wrong-kinds');
    await mkdir(join(project, 'a-directory'));
    await writeFile(join(fixture.projectRoot, 'a-file'), 'x');
    const directory = await prepare('wrong-kinds', { prompt_file: 'a-directory' });
    expect(directory.status, JSON.stringify(directory.body)).toBe(400);
    const underFile = await prepare('wrong-kinds', { project_dir: 'a-file/inner' });
    expect(underFile.status, JSON.stringify(underFile.body)).toBe(400);
  });
});

describe('evidence the gate reports', () => {
  it('counts a file that links out of the project as absent', async () => {
    const { project, away } = await plant('linked-evidence');
    await writeFile(join(away, 'decision.json'), JSON.stringify({ decision: 'positive', summary: 'not the agent\'s' }));
    await writeFile(join(away, 'notes.md'), 'notes from elsewhere');
    await mkdir(join(away, 'results'));
    await writeFile(join(away, 'results', 'r.json'), '{"a":1}');
    await mkdir(join(project, '.research'));
    await symlink(join(away, 'decision.json'), join(project, '.research', 'decision.json'));
    await symlink(join(away, 'notes.md'), join(project, 'run_notes.md'));
    await symlink(join(away, 'results'), join(project, 'results'));
    expect(inspectEvidence(fixture.projectRoot, project)).toEqual({
      run_notes: false,
      decision_file: false,
      decision: null,
      decision_summary: null,
      results_json_files: 0,
      sufficient_for_paper: false,
    });
  });

  it('reports nothing for a project directory that is itself a link out of project_root', async () => {
    const { away } = await plant('linked-project-away');
    await writeFile(join(away, 'notes.md'), 'notes from elsewhere');
    await mkdir(join(away, '.research'));
    await writeFile(join(away, '.research', 'decision.json'), JSON.stringify({ decision: 'positive' }));
    await writeFile(join(away, 'run_notes.md'), 'notes from elsewhere');
    await mkdir(join(away, 'results'));
    await writeFile(join(away, 'results', 'r.json'), '{"a":1}');
    const project = join(fixture.projectRoot, 'linked-project');
    await symlink(away, project);
    expect(inspectEvidence(fixture.projectRoot, project)).toMatchObject({ run_notes: false, decision_file: false, results_json_files: 0, sufficient_for_paper: false });
  });

  it('reads what the agent left inside its project: notes, the decision, and non-empty results files at any depth', async () => {
    const { project } = await plant('honest-evidence');
    await mkdir(join(project, '.research'), { recursive: true });
    await writeFile(join(project, '.research', 'decision.json'), JSON.stringify({ decision: 'positive', summary: 'it worked' }));
    await writeFile(join(project, 'run_notes.md'), '# Notes');
    await mkdir(join(project, 'results', 'deep', 'er'), { recursive: true });
    await writeFile(join(project, 'results', 'a.json'), '{"a":1}');
    await writeFile(join(project, 'results', 'deep', 'er', 'b.json'), '{"b":2}');
    await writeFile(join(project, 'results', 'empty.json'), '');
    expect(inspectEvidence(fixture.projectRoot, project)).toEqual({
      run_notes: true,
      decision_file: true,
      decision: 'positive',
      decision_summary: 'it worked',
      results_json_files: 2,
      sufficient_for_paper: true,
    });
  });
});
