import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_TOKEN } from '../support/gate.ts';
import { testPort } from '../support/ports.ts';
import { candidate } from '../support/research.ts';
import { RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';

// expected duration: ~90 s

/**
 * `rcp` (cli/, bin/rcp.js) as an operator runs it, against a real control plane and worker gate (the simulated agent):
 * the flow of docs/papers.md#from-a-run-to-an-imported-paper, from a candidate file to an imported paper through `rcp` alone, `rcp runs watch` in a
 * pseudo-terminal (util-linux `script`) for its live line, `--json` for the rest; and every kind of bad input answered
 * with one line and a non-zero exit code.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const RCP = join(ROOT, 'bin', 'rcp.js');
const run = promisify(execFile);

let stack: RunStack;
let home: string;

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'rcp-home-'));
  stack = await startRunStack({ controlPlaneOverrides: (gate) => ({ project_root: gate.projectRoot }) });
}, RUN_STACK_START_MS);
afterAll(async () => {
  await stack?.close();
  if (home) await rm(home, { recursive: true, force: true });
});

/** The environment of a user whose config folder is `home`, with no RCP_* of the test's own. */
const userEnv = (extra: Record<string, string> = {}) => {
  const { RCP_URL: _url, RCP_TOKEN: _token, ...inherited } = process.env as Record<string, string>;
  return { ...inherited, XDG_CONFIG_HOME: join(home, 'config'), ...extra };
};

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `rcp args` (stdin from `input`, else none) and answers its exit code and output. */
function rcp(args: string[], options: { input?: string; env?: Record<string, string> } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [RCP, ...args], { env: options.env ?? userEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

/** `rcp --json args`, which must succeed; answers its parsed output. */
async function rcpJson(args: string[]): Promise<any> {
  const result = await rcp(['--json', ...args]);
  expect(result.code, `rcp ${args.join(' ')}: ${result.stderr}`).toBe(0);
  return JSON.parse(result.stdout);
}


describe('rcp', () => {
  it('logs in with the token on stdin, into a profile only its owner can read', async () => {
    const login = await rcp(['login', '--url', stack.cpFixture.url], { input: `${CONTROL_TOKEN}\n` });
    expect(login.code, login.stderr).toBe(0);
    const profile = join(home, 'config', 'research-control-plane', 'rcp.json');
    expect((await stat(profile)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(profile, 'utf8'))).toEqual({ url: stack.cpFixture.url, token: CONTROL_TOKEN });
    expect(login.stdout).not.toContain(CONTROL_TOKEN);
  });

  it("runs the docs' flow from a candidate file to an imported paper", { timeout: 240_000 }, async () => {
    const file = join(home, 'candidates.json');
    await writeFile(file, JSON.stringify([candidate({ title: 'A paper through rcp', dedupe_key: 'rcp-paper' })]));
    const dry = await rcpJson(['research', 'import', file]);
    expect(dry.dry_run).toBe(true);
    const imported = await rcpJson(['research', 'import', file, '--live']);
    const candidateId = imported.results[0].candidate_id as string;
    expect((await rcpJson(['research', 'promote', candidateId, '--live'])).action).toMatch(/promot/);

    const [item] = await rcpJson(['queue', '--group', 'queued']);
    await stack.writeScenario(item.project_id, { scenario: 'normal', decision: 'finalize_positive', results: { accuracy: 0.93 } });
    const planned = await rcp(['dispatch']);
    expect(planned.stdout).toContain(`dry_run_dispatch: ${item.project_id}`);
    // The item chosen by name: the dry run shows it, and the live call dispatches that one.
    const chosen = await rcp(['dispatch', '--project', item.project_id]);
    expect(chosen.stdout).toContain(`dry_run_dispatch: ${item.project_id}`);
    const live = await rcpJson(['dispatch', '--project', item.project_id, '--live', '--yes']);
    expect(live).toMatchObject({ action: 'live_dispatch', candidate: { project_id: item.project_id } });
    stack.agents.remember(live);

    // In a terminal, one line updated in place until the run completes; exit 0.
    const command = [process.execPath, RCP, 'runs', 'watch', live.run_id, '--interval', '300'].join(' ');
    const watched = await run('script', ['-qefc', command, '/dev/null'], { env: userEnv(), timeout: 180_000 });
    expect(watched.stdout).toContain('\r\u001b[2K');
    // The quiet window filling (quiet samples of the 30 the gate needs), as the gate reports it while the run waits.
    expect(watched.stdout).toMatch(/gate finished_pending_gate  quiet [1-9]\d*\/30 /);
    expect(watched.stdout).toMatch(/completed.*: decision finalize_positive/);
    expect(watched.stdout).toContain('\u001b[32m');
    // With --json, a line for each change and the ending last.
    const lines = await rcp(['--json', 'runs', 'watch', live.run_id]);
    expect(lines.code).toBe(0);
    expect(JSON.parse(lines.stdout.trim().split('\n').at(-1)!)).toMatchObject({ completed: true, decision: 'finalize_positive' });

    const drafted = await rcpJson(['papers', 'draft-next', '--live']);
    const paperId = drafted.paper_id as string;
    expect(paperId, JSON.stringify(drafted)).toEqual(expect.any(String));
    await rcpJson(['papers', 'approve', paperId]);
    const packaged = await rcpJson(['papers', 'package', paperId, '--target-label', 'rcp']);
    await rcpJson(['papers', 'record-import', paperId, '--corpus-repo', 'lab/papers', '--commit-sha', 'abc1234', '--manifest-sha256', packaged.manifest_sha256]);
    const [paper] = await rcpJson(['papers']);
    expect(paper).toMatchObject({ paper_id: paperId, review_status: 'finalized' });
    const status = await rcpJson(['status']);
    expect(status.counts.paper_pipeline).toMatchObject({ published_imported: 1 });

    // What a cancel and a cycle did, in words: a finished run is left as it is; the cycle's dry run, stage by stage.
    const cancel = await rcp(['cancel', live.run_id]);
    expect(cancel.stdout).toMatch(new RegExp(`^${live.run_id}: already finished \\(\\w+\\); nothing to cancel\n$`));
    const cycle = await rcp(['cycle']);
    expect(cycle.code, cycle.stderr).toBe(0);
    const [verdict, header, ...stages] = cycle.stdout.trim().split('\n');
    expect(verdict).toMatch(/^dry_run_research_cycle: \S/);
    expect(header).toMatch(/^NAME +ACTION +REASON$/);
    expect(stages[0]).toMatch(/^stop_conditions +\S+ +\S/);
  });

  // Each case is an `rcp` process of its own, which on Node 20 compiles its sources first: a loaded machine takes
  // seconds for one, so the cases run at once, under a minute's timeout.
  it('answers bad input with one line and a non-zero exit code, never a stack trace', { timeout: 60_000 }, async () => {
    const damaged = join(home, 'damaged');
    await mkdir(join(damaged, 'research-control-plane'), { recursive: true });
    await writeFile(join(damaged, 'research-control-plane', 'rcp.json'), '{"url": ');
    const [unknown, badFlag, wrongToken, down, notLoggedIn, unreadable, unconfirmed, unknownProject] = await Promise.all([
      rcp(['bogus']),
      rcp(['queue', '--group', 'nowhere']),
      rcp(['status'], { env: userEnv({ RCP_URL: stack.cpFixture.url, RCP_TOKEN: 'not-the-token-0123456789abcdef' }) }),
      testPort().then((port) => rcp(['status'], { env: userEnv({ RCP_URL: `http://127.0.0.1:${port}`, RCP_TOKEN: CONTROL_TOKEN }) })),
      rcp(['status'], { env: userEnv({ XDG_CONFIG_HOME: join(home, 'nobody') }) }),
      rcp(['status'], { env: userEnv({ XDG_CONFIG_HOME: damaged }) }),
      rcp(['dispatch', '--live']),
      rcp(['dispatch', '--project', 'no-such-project']),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim().split('\n')[0]).toBe("error: unknown command 'bogus'");

    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(/^error: option '--group <group>' argument 'nowhere' is invalid/);

    expect(wrongToken.code).toBe(3);
    expect(wrongToken.stderr).toMatch(/^error: 401: .*\(request [\w-]+\)\n$/);

    expect(down.code).toBe(3);
    expect(down.stderr).toBe('error: cannot reach the control plane: ECONNREFUSED\n');

    expect(notLoggedIn.code).toBe(3);
    expect(notLoggedIn.stderr).toBe('error: not logged in: run rcp login, or set RCP_URL and RCP_TOKEN\n');

    expect(unreadable.code).toBe(3);
    expect(unreadable.stderr).toMatch(/^error: .*rcp\.json holds no url and token: run rcp login again\n$/);

    expect(unconfirmed.code).not.toBe(0);
    expect(unconfirmed.stderr).not.toContain('    at ');
    expect(unknownProject.code).toBe(1);
    expect(unknownProject.stderr).toMatch(/^error: 404: unknown project 'no-such-project' \(request [\w-]+\)\n$/);

    for (const result of [unknown, badFlag, wrongToken, down, notLoggedIn, unreadable, unknownProject]) expect(result.stderr).not.toContain('    at ');
  });

  it('prints a completion script for bash that names its commands', { timeout: 60_000 }, async () => {
    const bash = await rcp(['completion', 'bash']);
    expect(bash.code).toBe(0);
    expect(bash.stdout).toContain('complete -F _rcp_complete rcp');
    expect(bash.stdout).toContain('"runs") words="watch logs question files cat answer resume --state --project --limit --json --help"');
    const completed = await run('bash', ['-c', `${bash.stdout}\nCOMP_WORDS=(rcp ru); COMP_CWORD=1; _rcp_complete; echo "\${COMPREPLY[@]}"`]);
    expect(completed.stdout.trim()).toBe('runs');
    expect((await rcp(['completion', 'zsh'])).stdout).toContain('bashcompinit');
  });
});
