import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREFLIGHT_DEFAULTS, evaluatePreflight } from '../../capabilities/runs/domain/preflight-checks.ts';
import { callbackTokenFingerprint } from '../../platform/http/tokens.ts';
import { AGENT_ENV_ALLOW_LIST, AgentSandbox, RUN_CONTRACT_ENV, detectIsolation, gateConfigFiles, sandboxArgvPrefix } from '../../worker-gate/agent-sandbox/index.ts';
import { CALLBACK_TOKEN, CallbackReceiver, GATE_TOKEN, gateClient, startGateProcess, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';

// expected duration: ~20 s

const AGENT_USER = 'rcp-agent';

/** The gate's environment carries the service's credentials, as it does with both roles in one process. */
const SERVICE_SECRETS: Record<string, string> = {
  TEMPORAL_API_KEY: `temporal-api-key-${randomBytes(8).toString('hex')}`,
  TEMPORAL_TLS_CLIENT_KEY_DATA: `-----BEGIN PRIVATE KEY-----${randomBytes(8).toString('hex')}`,
  TEMPORAL_GRPC_META_AUTHORIZATION: `Bearer grpc-${randomBytes(8).toString('hex')}`,
  OTEL_EXPORTER_OTLP_HEADERS: `authorization=otel-${randomBytes(8).toString('hex')}`,
  PGPASSWORD: `pg-${randomBytes(8).toString('hex')}`,
  AWS_SECRET_ACCESS_KEY: `aws-${randomBytes(8).toString('hex')}`,
};
/** The control plane's config, world-readable under /etc, which the sandbox shows read-only: only its mask hides it. */
const CONTROL_PLANE_CONFIG = `/etc/rcp-sandbox-test-${randomBytes(4).toString('hex')}.json`;
const CONTROL_PLANE_SECRET = `control-plane-token-${randomBytes(8).toString('hex')}`;

let receiver: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;

function requireTools(): void {
  for (const tool of ['bwrap', 'setpriv']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    } catch {
      throw new Error(`${tool} is not installed: run scripts/ensure-bubblewrap.sh (bwrap) or install util-linux (setpriv)`);
    }
  }
  try {
    execFileSync('id', ['-u', AGENT_USER], { stdio: 'ignore' });
  } catch {
    throw new Error(`the user ${AGENT_USER} does not exist: run scripts/ensure-agent-user.sh as root`);
  }
}

/** A dispatch script of this test's own: from inside the run it tries what an agent must not manage, and says what it got. */
function probeScript(fixture: GateFixture, otherProject: string): string {
  const stateDir = join(fixture.dir, 'state');
  const q = (path: string) => `'${path}'`;
  return `#!/bin/sh
out="$PROJECT_DIR/probe"
mkdir -p "$out"
env > "$out/env.txt"
id -u > "$out/uid.txt"
id -un > "$out/user.txt"
attempt() { name=$1; shift; if "$@" > "$out/$name.out" 2>&1; then echo ok > "$out/$name.status"; else echo failed > "$out/$name.status"; fi; }
attempt cat-gate-config cat ${q(fixture.configPath)}
attempt cat-control-plane-config cat ${q(CONTROL_PLANE_CONFIG)}
attempt ls-state-dir ls -a ${q(stateDir)}
attempt ls-gate-records ls ${q(join(stateDir, 'worker-gate'))}
attempt ls-other-project ls ${q(otherProject)}
attempt cat-other-prompt cat ${q(join(otherProject, 'prompt.md'))}
attempt ls-project-root ls -a ${q(fixture.projectRoot)}
attempt ls-proc ls /proc
attempt write-home touch "$HOME/written"
attempt write-project touch "$PROJECT_DIR/written"
echo '{}'
`;
}

beforeAll(async () => {
  requireTools();
  writeFileSync(CONTROL_PLANE_CONFIG, JSON.stringify({ control_api_bearer_token: CONTROL_PLANE_SECRET }), { mode: 0o644 });
  chmodSync(CONTROL_PLANE_CONFIG, 0o644);
  receiver = await CallbackReceiver.start();
  fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { dispatch_script_path: './probe/probe.sh', agent_user: AGENT_USER } });
  const scriptDir = join(fixture.dir, 'probe');
  mkdirSync(scriptDir, { mode: 0o755 });
  chmodSync(scriptDir, 0o755);
  writeFileSync(join(scriptDir, 'probe.sh'), probeScript(fixture, join(fixture.projectRoot, 'bravo')), { mode: 0o755 });
  gate = await startGateProcess(fixture, { ...SERVICE_SECRETS, SVC_CONTROL_PLANE_CONFIG: CONTROL_PLANE_CONFIG });
  client = gateClient(fixture);
});

afterAll(async () => {
  await gate?.kill('SIGTERM');
  await receiver?.down();
  // The probe script starts nothing that outlives it: there is no agent process to stop.
  rmSync(CONTROL_PLANE_CONFIG, { force: true });
  if (fixture) rmSync(fixture.dir, { recursive: true, force: true });
});

describe('a dispatch script on a gate that can sandbox and switch users', () => {
  it('reports the isolation it gives agents on /dashboard/api and passes the strict preflight check', async () => {
    const { body } = await client.dashboard();
    // The report's details say why, where this machine cannot (a checkout the agent user cannot reach, no userns).
    expect(body.service.agent_isolation, JSON.stringify(body.service.agent_isolation)).toMatchObject({ mode: 'isolated', sandboxed: true, agent_user: AGENT_USER, runs_as: AGENT_USER });
    expect(body.service.agent_isolation.bwrap.version).toMatch(/^\d+\.\d+/);
    const preflight = evaluatePreflight(
      'local',
      {
        flags: { queue_paused: true, maintenance_mode: false },
        healthz: { status: 200, body: { ok: true, ready: true } },
        dashboard: { status: 200, body },
        expectedCallbackFingerprint: callbackTokenFingerprint(CALLBACK_TOKEN),
      },
      { ...PREFLIGHT_DEFAULTS, strict: false, required: ['worker_agent_isolation'] },
    );
    expect(preflight.checks.find((check) => check.name === 'worker_agent_isolation')).toMatchObject({ ok: true, data: { mode: 'isolated' } });
    expect(gate.output()).toMatch(/agent isolation \(isolated\)/);
  });

  it('runs it as the agent user, with the allow-listed environment, seeing only its project, its home and the system', { timeout: 60_000 }, async () => {
    // Another project on the same gate, prepared first: its files must stay out of reach.
    const other = await client.prepare({ run_id: 'bravo-run', project_id: 'bravo', project_dir: 'bravo', prompt_file: 'prompt.md', prompt_text: '# bravo\nsecret plan\n' });
    expect(other.status).toBe(200);
    const prepared = await client.prepare({ run_id: 'alpha-run', project_id: 'alpha', project_dir: 'alpha', prompt_file: 'prompt.md', prompt_text: '# alpha\n' });
    expect(prepared.status).toBe(200);
    const dispatched = await client.dispatch(client.dispatchBody('alpha-run'));
    expect(dispatched.status, JSON.stringify(dispatched.body)).toBe(200);

    const probe = join(fixture.projectRoot, 'alpha', 'probe');
    const read = (name: string) => readFileSync(join(probe, name), 'utf8').trim();
    const status = (name: string) => read(`${name}.status`);

    const agentUid = execFileSync('id', ['-u', AGENT_USER], { encoding: 'utf8' }).trim();
    expect(read('uid.txt')).toBe(agentUid);
    expect(read('user.txt')).toBe(AGENT_USER);

    const env = new Map(
      read('env.txt')
        .split('\n')
        .filter((line) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(line))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    for (const [name, value] of Object.entries(SERVICE_SECRETS)) {
      expect(env.has(name), name).toBe(false);
      expect(read('env.txt')).not.toContain(value);
    }
    expect(env.has('SVC_CONFIG')).toBe(false);
    expect(env.has('SVC_CONTROL_PLANE_CONFIG')).toBe(false);
    // Nothing but the documented list, the contract and agent_credential_env (the shell adds PWD, and SHLVL in some shells).
    const allowed = new Set<string>([...AGENT_ENV_ALLOW_LIST, ...RUN_CONTRACT_ENV, 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'FAKE_AGENT_COUNTER_FILE', 'FAKE_AGENT_WORK_SEC', 'FAKE_AGENT_CHILD_EXTRA_SEC', 'FAKE_AGENT_SCENARIO', 'PWD', 'SHLVL', '_', 'OLDPWD']);
    expect([...env.keys()].filter((name) => !allowed.has(name))).toEqual([]);
    expect(env.get('HOME')).toMatch(new RegExp(`^${join(fixture.dir, 'state', 'agent-sandbox', 'homes')}/[0-9a-f]{16}$`));
    expect(env.get('USER')).toBe(AGENT_USER);
    expect(env.get('TMPDIR')).toBe('/tmp');

    // The gate's config files, of both roles: not there, or empty.
    expect(status('cat-gate-config')).toBe('failed');
    expect(read('cat-control-plane-config.out')).not.toContain(CONTROL_PLANE_SECRET);
    expect(read('cat-gate-config.out')).not.toContain(GATE_TOKEN);
    // state_dir shows the way to the agent's own home and nothing else; the gate's records are not there.
    expect(read('ls-state-dir.out').split('\n').filter((name) => name !== '.' && name !== '..')).toEqual(['agent-sandbox']);
    expect(status('ls-gate-records')).toBe('failed');
    // The other project, and project_root's listing, show nothing of it.
    expect(status('ls-other-project')).toBe('failed');
    expect(status('cat-other-prompt')).toBe('failed');
    expect(read('ls-project-root.out').split('\n').filter((name) => name !== '.' && name !== '..')).toEqual(['alpha']);
    // No /proc: nothing of the gate's or other runs' processes is in view.
    expect(status('ls-proc')).toBe('failed');
    // Its project and home are its own to write.
    expect(status('write-home')).toBe('ok');
    expect(status('write-project')).toBe('ok');
    expect(existsSync(join(fixture.projectRoot, 'alpha', 'written'))).toBe(true);
    // The gate's own view of the other project is intact.
    expect(readdirSync(join(fixture.projectRoot, 'bravo'))).toContain('prompt.md');
  });
});

describe('a gate that cannot sandbox', () => {
  it('says so on /dashboard/api and the strict preflight fails, when bwrap is not on its PATH', { timeout: 60_000 }, async () => {
    const bin = join(fixture.dir, 'bin-without-bwrap');
    mkdirSync(bin);
    for (const dir of ['/usr/bin', '/bin']) {
      if (!existsSync(dir)) continue;
      for (const name of readdirSync(dir)) {
        if (name === 'bwrap' || existsSync(join(bin, name))) continue;
        symlinkSync(join(dir, name), join(bin, name));
      }
    }
    const bare = await writeGateConfig({ callbackUrl: receiver.url, overrides: { agent_user: AGENT_USER } });
    const bareGate = await startGateProcess(bare, { PATH: bin });
    try {
      const { body } = await gateClient(bare).dashboard();
      const isolation = body.service.agent_isolation;
      expect(isolation).toMatchObject({ mode: 'user_only', sandboxed: false, bwrap: { ok: false, path: null } });
      expect(isolation.bwrap.detail).toMatch(/bwrap \(bubblewrap\) is not on PATH/);
      expect(isolation.summary).toMatch(/UNSANDBOXED/);
      expect(bareGate.output()).toMatch(/agent isolation \(user_only\): agents run UNSANDBOXED/);
      const observed = {
        flags: { queue_paused: true, maintenance_mode: false },
        healthz: { status: 200, body: { ok: true, ready: true } },
        dashboard: { status: 200, body },
        expectedCallbackFingerprint: callbackTokenFingerprint(CALLBACK_TOKEN),
      };
      const strict = evaluatePreflight('local', observed, { ...PREFLIGHT_DEFAULTS, strict: true });
      expect(strict.ok).toBe(false);
      expect(strict.checks.find((check) => check.name === 'worker_agent_isolation')).toMatchObject({ ok: false, data: { sandboxed: false } });
      expect(strict.summary).toMatch(/worker_agent_isolation/);
      // Runs still start, unsandboxed, as the agent user: the fake agent's run reaches its session start.
      const launched = await gateClient(bare).launch('charlie-run', 'normal');
      expect(launched.status, JSON.stringify(launched.body)).toBe(200);
      await receiver.waitFor('charlie-run', 'session_started', 30_000);
      // Stopped before its gate goes, so that nothing of it outlives the test.
      expect((await gateClient(bare).call('POST', '/runs/charlie-run/cancel')).status).toBe(200);
    } finally {
      await bareGate.kill('SIGTERM');
      rmSync(bare.dir, { recursive: true, force: true });
    }
  });

  it("reports agent_isolation 'off' as unsandboxed, and a missing agent user as no user switch", () => {
    const settings = { state_dir: fixture.dir, project_root: fixture.projectRoot, agent_read_only_paths: [], agent_writable_paths: [] };
    const off = detectIsolation({ ...settings, agent_user: AGENT_USER, agent_isolation: 'off' });
    expect(off.report).toMatchObject({ sandboxed: false, bwrap: { ok: false, detail: "agent_isolation is 'off'" } });
    expect(off.report.mode).not.toBe('isolated');
    const nobody = detectIsolation({ ...settings, agent_user: 'rcp-no-such-user', agent_isolation: 'auto' });
    expect(nobody.report).toMatchObject({ user_switch: { ok: false }, sandboxed: true, mode: 'sandboxed' });
    expect(nobody.report.user_switch.detail).toMatch(/'rcp-no-such-user' does not exist \(scripts\/ensure-agent-user.sh creates it\)/);
    // A state_dir and project_root (not made yet) behind a directory closed to other users: bwrap, run as the agent
    // user, could not bind them, so agents run as the gate's user, and the report says where the way is closed.
    const closed = join(fixture.dir, 'closed');
    mkdirSync(closed, { mode: 0o700 });
    chmodSync(closed, 0o700);
    const behind = detectIsolation({ ...settings, state_dir: join(closed, 'state'), project_root: join(closed, 'state', 'projects'), agent_user: AGENT_USER, agent_isolation: 'auto' });
    expect(behind.report).toMatchObject({ mode: 'sandboxed', user_switch: { ok: false } });
    expect(behind.report.user_switch.detail).toBe(`${AGENT_USER} cannot reach project_root ${join(closed, 'state', 'projects')}: ${closed} is closed to it`);
  });
});

describe('the argv builder, run through bwrap', () => {
  it('shows a tool kept inside a masked directory of the gate, but not the config file beside it nor the rest', () => {
    const root = join(fixture.dir, 'builder');
    const stateDir = join(root, 'state');
    const tools = join(stateDir, 'tools');
    const projectRoot = join(root, 'projects');
    const project = join(projectRoot, 'delta');
    for (const dir of [root, stateDir, tools, projectRoot, project]) mkdirSync(dir, { recursive: true, mode: 0o711 });
    writeFileSync(join(tools, 'tool.sh'), '#!/bin/sh\necho tool ran\n', { mode: 0o755 });
    writeFileSync(join(tools, 'config.json'), '{"token":"beside-the-tool"}', { mode: 0o644 });
    writeFileSync(join(stateDir, 'records.json'), '{"token":"gate-record"}', { mode: 0o644 });
    writeFileSync(join(tools, 'temporal-client.key'), 'PRIVATE KEY', { mode: 0o644 });
    const sandbox = new AgentSandbox(
      { agent_user: AGENT_USER, agent_isolation: 'auto', state_dir: stateDir, project_root: projectRoot, agent_read_only_paths: [], agent_writable_paths: [], agent_credential_env: [] },
      detectIsolation({ agent_user: AGENT_USER, agent_isolation: 'auto', state_dir: stateDir, project_root: projectRoot, dispatch_script_path: join(tools, 'tool.sh'), agent_read_only_paths: [], agent_writable_paths: [] }),
      [join(tools, 'config.json'), ...gateConfigFiles({}, root, { temporal_tls_client_key_path: join(tools, 'temporal-client.key') })],
    );
    const plan = sandbox.prepareRun(project, project, join(project, 'prompt.md'), tools);
    const prefix = sandboxArgvPrefix(plan);
    const run = (script: string) => execFileSync(prefix[0]!, [...prefix.slice(1), 'sh', '-c', script], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
    expect(run(`${join(tools, 'tool.sh')}; id -un; pwd`)).toBe(`tool ran\n${AGENT_USER}\n${project}\n`);
    // Covered by /dev/null, which the sandbox's nodev mounts do not even open.
    expect(run(`cat ${join(tools, 'config.json')} 2>/dev/null; echo "[end]"`)).toBe('[end]\n');
    expect(run(`cat ${join(stateDir, 'records.json')} 2>/dev/null || echo hidden`)).toBe('hidden\n');
    // The Temporal client's key, which a process with both roles holds, is the gate's too.
    expect(run(`cat ${join(tools, 'temporal-client.key')} 2>/dev/null; echo "[end]"`)).toBe('[end]\n');
  });
});
