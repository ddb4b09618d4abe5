import { existsSync, realpathSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LaunchedRuntime } from '../../worker-gate/contract/agent-runtimes.ts';
import { pinnedAgentBinary } from '../../worker-gate/launchers/installed-agents.ts';
import { agentHomePath } from '../../worker-gate/launchers/records.ts';
import { agentRecord, dispatchedRun, EVIDENCE, preparedRun, sessionRecord, startAgentGate, WRITE_EVIDENCE, type AgentGate } from '../support/agent-gates.ts';
import { CALLBACK_TOKEN, CallbackReceiver, CONTROL_TOKEN, GATE_TOKEN, gateClient, startGateProcess, writeGateConfig } from '../support/gate.ts';
import { MessagesServer, ResponsesServer } from '../../scripts/scripted-model-servers.ts';
import { testPort } from '../support/ports.ts';

/**
 * The gate's records out of the agent's reach (docs/security.md#security-model), attacked with the real Codex CLI and Claude
 * Code under real gate processes whose state_dir lies in the temporary directory, as the suite's own do: links the
 * agent plants where the launcher once wrote, the gate's config read into the evidence, the tool's own home and hooks,
 * the user the tool runs as. And the gate's start, which refuses a state_dir or project_root within an agent's reach.
 */

// expected duration: ~60 s

const WINDOW_MS = 90_000;
const GATE_SECRETS = [GATE_TOKEN, CONTROL_TOKEN, CALLBACK_TOKEN];

let receiver: CallbackReceiver;
let responses: ResponsesServer;
let messages: MessagesServer;
let codex: AgentGate;
let claude: AgentGate;

beforeAll(async () => {
  for (const runtime of ['codex', 'claude-code'] as const) {
    if (!existsSync(pinnedAgentBinary(runtime))) throw new Error(`${runtime} is not installed at ${pinnedAgentBinary(runtime)}: run bash scripts/ensure-agents.sh (npm test's pretest does)`);
  }
  receiver = await CallbackReceiver.start();
  responses = await ResponsesServer.start(await testPort());
  messages = await MessagesServer.start(await testPort());
  [codex, claude] = await Promise.all([
    startAgentGate(receiver, 'codex', { OPENAI_BASE_URL: responses.baseUrl, OPENAI_API_KEY: 'sk-scripted-model-key-0123456789' }),
    startAgentGate(receiver, 'claude-code', { ANTHROPIC_BASE_URL: messages.baseUrl, ANTHROPIC_API_KEY: 'sk-ant-scripted-model-key-0123456789' }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([codex?.process.kill('SIGTERM'), claude?.process.kill('SIGTERM')]);
  await receiver?.down();
  await responses?.down();
  await messages?.down();
  for (const started of [codex, claude]) if (started) await rm(started.fixture.dir, { recursive: true, force: true });
});

/** Files and a directory outside every project, the gate's user's: what a planted link points the launcher at. */
async function plantTargets(on: AgentGate, key: string) {
  const outside = join(on.fixture.dir, `outside-${key}`);
  await mkdir(join(outside, 'dir'), { recursive: true });
  const files = Object.fromEntries(
    await Promise.all(
      ['events.jsonl', 'stderr.log', 'session.json', 'agent.log'].map(async (name) => {
        const path = join(outside, `${name}.sh`);
        await writeFile(path, '');
        return [name, path] as const;
      }),
    ),
  );
  return { outside, dir: join(outside, 'dir'), files, marker: join(outside, 'code-ran') };
}

/**
 * Links at every place the launcher once wrote in the project: planted before the run (the records' files, agent.log)
 * and by the agent while it runs (the records' directory itself), so nothing the launcher opens is checked once and
 * used later.
 */
async function plantLinksBeforeRun(on: AgentGate, key: string, targets: Awaited<ReturnType<typeof plantTargets>>) {
  const records = join(on.fixture.projectRoot, key, '.research', 'agent');
  await mkdir(records, { recursive: true });
  for (const name of ['events.jsonl', 'stderr.log', 'session.json']) await symlink(targets.files[name]!, join(records, name));
  await symlink(targets.files['agent.log']!, join(on.fixture.projectRoot, key, '.research', 'agent.log'));
}

const swapRecordsDir = (targetDir: string) => `mv .research/agent .research/agent.planted && ln -s ${targetDir} .research/agent`;

/** The agent's last message: code, had a launcher written it where bash sources it. */
const hostileMessage = (marker: string) => `Done. "$(touch ${marker})" \`touch ${marker}\``;

async function expectNothingOutside(targets: Awaited<ReturnType<typeof plantTargets>>) {
  for (const path of Object.values(targets.files)) expect(await readFile(path, 'utf8'), path).toBe('');
  expect(await readdir(targets.dir)).toEqual([]);
  expect(existsSync(targets.marker)).toBe(false);
}

const toolHomeOnHost = (on: AgentGate, key: string, runtime: LaunchedRuntime) =>
  agentHomePath(realpathSync(join(on.fixture.dir, 'state')), join(realpathSync(on.fixture.projectRoot), key), runtime);

describe.concurrent('a sealed run: the real tools under a gate whose state_dir is in the temporary directory', () => {
  it('Codex: links planted where the launcher once wrote write nothing outside the gate\'s records and run nothing', { timeout: WINDOW_MS + 30_000 }, async () => {
    const key = 'sealed-codex-links';
    const body = await preparedRun(codex, key, { sandbox: 'workspace-write' });
    const targets = await plantTargets(codex, key);
    await plantLinksBeforeRun(codex, key, targets);
    responses.script(key, [{ kind: 'command', cmd: `${WRITE_EVIDENCE} && ${swapRecordsDir(targets.dir)}` }, { kind: 'message', text: hostileMessage(targets.marker) }]);
    const runId = await dispatchedRun(codex, body);
    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);

    await expectNothingOutside(targets);
    // The session went where the gate keeps it, whole, its message as the agent wrote it.
    expect(await sessionRecord(codex, key)).toMatchObject({ runtime: 'codex', exit_code: 0, last_message: hostileMessage(targets.marker) });
    expect(await agentRecord(codex, key, 'events.jsonl')).toContain('"turn.completed"');
    expect(await agentRecord(codex, key, 'agent.log')).toContain('starting codex');
  });

  it('Codex: an agent that cats the gate\'s config and state into its evidence gets none of it, and runs as the agent user', { timeout: WINDOW_MS + 30_000 }, async () => {
    const key = 'sealed-codex-cat';
    const state = join(codex.fixture.dir, 'state');
    const steal = [
      `cat ${codex.fixture.configPath} >> run_notes.md 2>&1`,
      `cat ${state}/worker-gate/runs/* >> run_notes.md 2>&1`,
      `ls -R ${state} >> run_notes.md 2>&1`,
      'env >> run_notes.md',
      'id -un > whoami.txt',
    ].join('; ');
    responses.script(key, [{ kind: 'command', cmd: `${WRITE_EVIDENCE} && { ${steal}; true; }` }, { kind: 'message', text: 'Notes taken.' }]);
    const runId = await dispatchedRun(codex, await preparedRun(codex, key, { sandbox: 'workspace-write' }));
    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);

    const notes = await readFile(join(codex.fixture.projectRoot, key, 'run_notes.md'), 'utf8');
    expect(notes).toContain('The loss went down.');
    expect(notes).toMatch(/No such file or directory/);
    for (const secret of GATE_SECRETS) expect(notes).not.toContain(secret);
    expect(notes).not.toContain('event_token_sha256');
    expect(JSON.stringify(finished.body)).not.toContain(GATE_TOKEN);
    expect((await readFile(join(codex.fixture.projectRoot, key, 'whoami.txt'), 'utf8')).trim()).toBe('rcp-agent');
  });

  it('Codex: its own home and hooks are out of its agent\'s reach, though state_dir lies in /tmp, which workspace-write may write', { timeout: WINDOW_MS + 30_000 }, async () => {
    const key = 'sealed-codex-home';
    const body = await preparedRun(codex, key, { sandbox: 'workspace-write' });
    const onHost = toolHomeOnHost(codex, key, 'codex');
    const forge = [
      'echo forged >> "$CODEX_HOME/hooks.json"',
      'echo forged >> "$CODEX_HOME/config.toml"',
      `echo forged >> ${onHost}/hooks.json`,
      'for f in "$CODEX_HOME"/sessions/*/*/*/rollout-*.jsonl; do echo \'{"timestamp":"2000-01-01T00:00:00Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":900000,"output_tokens":0}}}}\' >> "$f"; done',
      'echo "$CODEX_HOME" > codex-home.txt',
    ].join('; ');
    responses.script(key, [{ kind: 'command', cmd: `${WRITE_EVIDENCE} && { ${forge}; true; }` }, { kind: 'message', text: 'Tried.' }]);
    const runId = await dispatchedRun(codex, body);
    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);

    // The tool saw its home outside the temporary directory, and its sandboxed commands could not write it.
    expect((await readFile(join(codex.fixture.projectRoot, key, 'codex-home.txt'), 'utf8')).trim()).toBe('/run/rcp-agent/tool-home');
    expect(onHost.startsWith(realpathSync(codex.fixture.dir))).toBe(true);
    for (const name of ['hooks.json', 'config.toml']) expect(await readFile(join(onHost, name), 'utf8')).not.toContain('forged');
    const rollouts = await readdir(join(onHost, 'sessions'), { recursive: true });
    const rollout = rollouts.find((name) => String(name).endsWith('.jsonl'));
    expect(rollout).toBeDefined();
    // The command that tried to append it is in the file (the rollout records it); the forged line itself is not.
    expect(await readFile(join(onHost, 'sessions', String(rollout)), 'utf8')).not.toMatch(/^\{"timestamp":"2000-01-01/m);
    // Its hooks ran: the gate heard the session start from them.
    expect(receiver.deliveredForRun(runId).map((callback) => callback.body.event_type)).toContain('session_started');
  });

  it('Claude Code: links planted where the launcher once wrote write nothing outside; its agent reads none of the gate\'s config and runs as the agent user', { timeout: WINDOW_MS + 30_000 }, async () => {
    const key = 'sealed-claude';
    const body = await preparedRun(claude, key, { sandbox: 'bypassPermissions' });
    const targets = await plantTargets(claude, key);
    await plantLinksBeforeRun(claude, key, targets);
    const steal = `{ cat ${claude.fixture.configPath} >> run_notes.md 2>&1; ls -R ${join(claude.fixture.dir, 'state')} >> run_notes.md 2>&1; id -un > whoami.txt; ${swapRecordsDir(targets.dir)}; true; }`;
    messages.script(key, [
      ...EVIDENCE.map(({ path, content }) => ({ kind: 'write' as const, path, content })),
      { kind: 'command', cmd: steal },
      { kind: 'message', text: hostileMessage(targets.marker) },
    ]);
    const runId = await dispatchedRun(claude, body);
    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);

    await expectNothingOutside(targets);
    expect(await sessionRecord(claude, key)).toMatchObject({ runtime: 'claude-code', exit_code: 0, last_message: hostileMessage(targets.marker) });
    const notes = await readFile(join(claude.fixture.projectRoot, key, 'run_notes.md'), 'utf8');
    expect(notes).toMatch(/No such file or directory/);
    for (const secret of GATE_SECRETS) expect(notes).not.toContain(secret);
    expect((await readFile(join(claude.fixture.projectRoot, key, 'whoami.txt'), 'utf8')).trim()).toBe('rcp-agent');
  });
});

describe("the gate's start: its records out of every agent's reach", () => {
  async function startRefusal(overrides: Record<string, unknown>): Promise<string> {
    const fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides });
    try {
      const started = await startGateProcess(fixture).catch((error: Error) => error);
      if (!(started instanceof Error)) {
        await started.kill('SIGTERM');
        return 'started';
      }
      return started.message;
    } finally {
      await rm(fixture.dir, { recursive: true, force: true });
    }
  }

  it('refuses a state_dir inside project_root', { timeout: 60_000 }, async () => {
    const refusal = await startRefusal({ state_dir: './projects/state' });
    expect(refusal).toMatch(/the worker gate refuses to start: state_dir \(.*\/projects\/state\) lies inside project_root/);
  });

  it('refuses a state_dir and project_root in the temporary directory when Codex would run without bwrap', { timeout: 60_000 }, async () => {
    const refusal = await startRefusal({ agent_runtime: 'codex', agent_isolation: 'off' });
    expect(refusal).toMatch(/state_dir \(\/tmp\/rcp-gate-[^)]*\) lies inside \/tmp, which codex lets its agent write when the agent is not isolated by bwrap/);
    expect(refusal).toMatch(/project_root \(\/tmp\/rcp-gate-[^)]*\) lies inside \/tmp/);
  });

  it('refuses an agent_writable_paths entry that would show state_dir or project_root read-write', { timeout: 60_000 }, async () => {
    const refusal = await startRefusal({ agent_writable_paths: ['./agent-shared', '.'] });
    expect(refusal).toMatch(/agent_writable_paths entry \/tmp\/rcp-gate-[^ ]* overlaps state_dir/);
    expect(refusal).toMatch(/agent_writable_paths entry \/tmp\/rcp-gate-[^ ]* overlaps project_root/);
    expect(await startRefusal({ agent_writable_paths: ['./state/agent-notes'] })).toMatch(/overlaps state_dir/);
  });

  it("refuses a real tool's dispatch whose prompt lies outside its project, which its runner never opens", { timeout: 60_000 }, async () => {
    const fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { agent_runtime: 'codex' } });
    const gate = await startGateProcess(fixture);
    try {
      const client = gateClient(fixture);
      const body = client.dispatchBody('outside-prompt-run', { prompt_file: '../common-prompts/prompt.md' });
      await mkdir(join(fixture.projectRoot, 'common-prompts'), { recursive: true });
      await mkdir(join(fixture.projectRoot, String(body.project_dir)), { recursive: true });
      await writeFile(join(fixture.projectRoot, 'common-prompts', 'prompt.md'), 'a prompt beside the project');
      const refused = await client.dispatch(body);
      expect(refused.status, JSON.stringify(refused.body)).toBe(400);
      expect(JSON.stringify(refused.body)).toContain("prompt_file must lie inside project_dir for agent_runtime 'codex'");
    } finally {
      await gate.kill('SIGTERM');
      await rm(fixture.dir, { recursive: true, force: true });
    }
  });

  it('starts a Claude Code gate whose state_dir is in the temporary directory when its agents are isolated by bwrap', { timeout: 60_000 }, async () => {
    expect(await startRefusal({ agent_runtime: 'claude-code' })).toBe('started');
  });
});
