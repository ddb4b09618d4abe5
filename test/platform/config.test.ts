import { chmod, mkdtemp, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { formatProblems, loadConfig } from '../../platform/config/load.ts';
import type { ConfigEnv, LoadConfigResult } from '../../platform/config/load.ts';
import { DEFAULT_HTTP_LIMITS } from '../../api/create-server.ts';
import { httpLimitsFrom } from '../../bin/http-limits.ts';
import { ConfigFieldsSchema, SECRET_FIELDS, configFieldDocs, redactConfig } from '../../platform/config/schema.ts';
import type { Config } from '../../platform/config/schema.ts';
import { END_MARKER, START_MARKER, main as generateDocs, renderConfigReference } from '../../scripts/generate-config-docs.ts';

const CONTROL_TOKEN = 'ctl_9f8e7d6c5b4a39281706f5e4d3c2b1a0';
const CALLBACK_TOKEN = 'cb_0a1b2c3d4e5f60718293a4b5c6d7e8f9';
const WORKER_TOKEN = 'wk_11223344556677889900aabbccddeeff';

const REQUIRED_FIELDS = [
  'control_api_bearer_token',
  'completion_callback_url',
  'completion_callback_token',
  'state_dir',
  'project_root',
] as const;

type RawConfig = Record<string, unknown>;

function baseConfig(extra: RawConfig = {}): RawConfig {
  return {
    control_api_bearer_token: CONTROL_TOKEN,
    completion_callback_url: 'http://127.0.0.1:9000/callback',
    completion_callback_token: CALLBACK_TOKEN,
    state_dir: 'state',
    project_root: 'projects',
    dispatch_script_path: 'bin/dispatch.sh',
    ...extra,
  };
}

function gpuTarget(extra: RawConfig = {}): RawConfig {
  return { wake_gate_url: 'http://10.0.0.5:8788', bearer_token: WORKER_TOKEN, role: 'gpu_worker', ...extra };
}

const tempDirs: string[] = [];

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rcp-config-test-'));
  tempDirs.push(dir);
  return dir;
}

afterAll(async () => {
  await Promise.all(tempDirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function writeJson(path: string, value: unknown): Promise<string> {
  await writeFile(path, typeof value === 'string' ? value : JSON.stringify(value, null, 2));
  return path;
}

async function load(config: unknown, env: ConfigEnv = {}): Promise<LoadConfigResult> {
  const dir = await tempDir();
  const path = await writeJson(join(dir, 'config.json'), config);
  return loadConfig({ env: { SVC_CONFIG: path, ...env }, cwd: dir });
}

async function problemsOf(config: unknown, env: ConfigEnv = {}): Promise<string[]> {
  const result = await load(config, env);
  if (result.ok) throw new Error('expected configuration problems, but the config loaded');
  return result.problems;
}

async function configOf(config: unknown, env: ConfigEnv = {}): Promise<Config> {
  const result = await load(config, env);
  if (!result.ok) throw new Error(`expected a valid config:\n${formatProblems(result.problems)}`);
  return result.config;
}

describe('loadConfig: valid files and defaults', () => {
  it('applies documented defaults to a minimal config', async () => {
    const config = await configOf(baseConfig());
    expect(config).toMatchObject({
      roles: ['control_plane'],
      listen_host: '0.0.0.0',
      listen_port: 8787,
      allowed_hosts: [],
      http_request_timeout_sec: 30,
      http_max_connections: 256,
      http_max_connections_per_address: 128,
      dispatch_timeout_sec: 30,
      log_events: true,
      live_dispatch_enabled: false,
      sample_interval_sec: 5,
      idle_sustain_sec: 180,
      cpu_idle_threshold_pct: 35,
      gpu_idle_avg_threshold_pct: 10,
      gpu_idle_peak_threshold_pct: 20,
      vram_delta_threshold_mib: 1024,
      max_wait_after_idle_sec: 43200,
      default_workload_class: 'inference_eval',
      workload_profiles: {},
      worker_targets: {},
      workload_machine_targets: {},
      completion_callback_timeout_sec: 120,
      paper_writer_provider: 'deterministic',
      paper_writer_api_key: '',
      paper_writer_temperature: 0.2,
      paper_writer_max_tokens: 12000,
      operational_trace_max_payload_bytes: 16384,
      control_plane_store_backend: 'embedded',
      core_store_backend: 'control_plane',
      pg_database_url: '',
      session_cookie_secure: false,
      temporal_address: '',
      temporal_namespace: 'default',
      temporal_task_queue: 'control-plane',
      temporal_ui_enabled: true,
      temporal_ui_port: 8233,
      research_provider_min_remaining_credits: 5,
      research_provider_request_reserve: 10,
    });
    expect(config.stale_project_process_command_markers.length).toBeGreaterThan(0);
    expect(config.worker_wake_gate_url).toBeUndefined();
    expect(config.research_provider_api_key).toBeUndefined();
  });

  it('gives servers built without a config the same HTTP limits as the config defaults', async () => {
    expect(httpLimitsFrom(await configOf(baseConfig()))).toEqual(DEFAULT_HTTP_LIMITS);
    expect(httpLimitsFrom(await configOf(baseConfig({ http_request_timeout_sec: 2.5, http_max_connections: 4 })))).toEqual({
      requestTimeoutMs: 2500,
      maxConnections: 4,
      // Capped by http_max_connections, and the first-request deadline by the request timeout.
      maxConnectionsPerAddress: 4,
      firstRequestTimeoutMs: 2500,
    });
    expect(httpLimitsFrom(await configOf(baseConfig({ http_request_timeout_sec: 60, http_max_connections_per_address: 8 })))).toEqual({
      requestTimeoutMs: 60_000,
      maxConnections: 256,
      maxConnectionsPerAddress: 8,
      firstRequestTimeoutMs: 10_000,
    });
  });

  it('accepts both roles, worker targets and machine targets', async () => {
    const config = await configOf(
      baseConfig({
        roles: ['control_plane', 'worker_gate'],
        worker_wake_gate_bearer_token: 'gate-token-0123456789abcdef',
        worker_targets: { 'gpu-1': gpuTarget({ min_memory_available_mib: 2048 }) },
        workload_machine_targets: { gpu_required: 'gpu-1' },
        workload_profiles: { training: { idle_sustain_sec: 600 } },
      }),
    );
    expect(config.roles).toEqual(['control_plane', 'worker_gate']);
    expect(config.worker_targets['gpu-1']?.min_memory_available_mib).toBe(2048);
    expect(config.workload_machine_targets.gpu_required).toBe('gpu-1');
    expect(config.workload_profiles.training).toEqual({ idle_sustain_sec: 600 });
  });

  it('treats an empty string in an optional URL or secret as unset', async () => {
    const config = await configOf(baseConfig({ worker_wake_gate_url: '', push_app_token: '', worker_wake_gate_bearer_token: '' }));
    expect(config.worker_wake_gate_url).toBeUndefined();
    expect(config.push_app_token).toBeUndefined();
    expect(config.worker_wake_gate_bearer_token).toBeUndefined();
  });
});

describe('loadConfig: required fields', () => {
  it.each(REQUIRED_FIELDS)('reports a missing %s', async (field) => {
    const raw = baseConfig();
    delete raw[field];
    const problems = await problemsOf(raw);
    expect(problems).toEqual([`${field}: is required`]);
  });

  it('needs dispatch_script_path only where a worker gate runs scripts', async () => {
    const gate = { roles: ['worker_gate'], worker_wake_gate_bearer_token: WORKER_TOKEN };
    const withoutScript = () => {
      const raw = baseConfig(gate);
      delete raw.dispatch_script_path;
      return raw;
    };
    expect(await problemsOf(withoutScript())).toEqual(['dispatch_script_path: is required when the worker gate starts agents with agent_runtime "script"']);
    expect(await problemsOf({ ...withoutScript(), agent_runtime: 'codex', agent_runtime_by_workload_class: { training: 'script' } })).toEqual([
      'dispatch_script_path: is required when the worker gate starts agents with agent_runtime "script"',
    ]);
    await expect(configOf({ ...withoutScript(), agent_runtime: 'codex' })).resolves.toMatchObject({ agent_runtime: 'codex' });
    const controlPlane = baseConfig();
    delete controlPlane.dispatch_script_path;
    await expect(configOf(controlPlane)).resolves.toBeDefined();
  });

  it.each(['state_dir', 'project_root', 'dispatch_script_path'])('refuses an empty %s', async (field) => {
    expect(await problemsOf(baseConfig({ [field]: '' }))).toEqual([`${field}: must not be empty`]);
  });

  it.each(['control_api_bearer_token', 'completion_callback_token'])('refuses a %s shorter than 16 characters', async (field) => {
    expect(await problemsOf(baseConfig({ [field]: 'a'.repeat(15) }))).toEqual([`${field}: must be at least 16 characters`]);
    await expect(configOf(baseConfig({ [field]: 'a'.repeat(16) }))).resolves.toBeDefined();
  });

  it.each(['ftp://example.com/cb', 'not a url', 'http://', '/relative/path'])(
    'refuses completion_callback_url %j',
    async (url) => {
      expect(await problemsOf(baseConfig({ completion_callback_url: url }))).toEqual([
        'completion_callback_url: must be an http(s) URL with a host',
      ]);
    },
  );
});

type RangeCase = { field: string; inside: number[]; outside: number[] };

// Bounds are probed just inside and just outside; "> 0" fields accept any positive value.
const RANGE_CASES: RangeCase[] = [
  { field: 'listen_port', inside: [0, 65535], outside: [-1, 65536] },
  { field: 'temporal_ui_port', inside: [1, 65535], outside: [0, 65536] },
  { field: 'http_request_timeout_sec', inside: [1, 3600], outside: [0.99, 3600.01] },
  { field: 'http_max_connections', inside: [1], outside: [0] },
  { field: 'http_max_connections_per_address', inside: [1], outside: [0] },
  { field: 'dispatch_timeout_sec', inside: [0.001], outside: [0, -1] },
  { field: 'sample_interval_sec', inside: [1], outside: [0.99] },
  { field: 'idle_sustain_sec', inside: [30], outside: [29.99] },
  { field: 'cpu_idle_threshold_pct', inside: [0, 100], outside: [-0.01, 100.01] },
  { field: 'gpu_idle_avg_threshold_pct', inside: [0, 100], outside: [-0.01, 100.01] },
  { field: 'gpu_idle_peak_threshold_pct', inside: [0, 100], outside: [-0.01, 100.01] },
  { field: 'vram_delta_threshold_mib', inside: [0], outside: [-1] },
  { field: 'max_wait_after_idle_sec', inside: [60], outside: [59.99] },
  { field: 'stale_project_process_grace_sec', inside: [0], outside: [-1] },
  { field: 'stale_project_process_term_grace_sec', inside: [0], outside: [-0.5] },
  { field: 'completion_callback_timeout_sec', inside: [0.5], outside: [0] },
  { field: 'queue_alert_cooldown_sec', inside: [0], outside: [-1] },
  { field: 'queue_alert_hang_after_sec', inside: [0], outside: [-1] },
  { field: 'chat_alert_webhook_timeout_sec', inside: [0.5], outside: [0] },
  { field: 'paper_writer_timeout_sec', inside: [0.5], outside: [0] },
  { field: 'paper_writer_temperature', inside: [0, 2], outside: [-0.01, 2.01] },
  { field: 'paper_writer_max_tokens', inside: [1], outside: [0] },
  { field: 'paper_evidence_sync_timeout_sec', inside: [0.5], outside: [0] },
  { field: 'route_observability_slow_ms', inside: [0], outside: [-1] },
  { field: 'route_observability_memory_warn_rss_mib', inside: [0], outside: [-1] },
  { field: 'operational_trace_max_payload_bytes', inside: [1024], outside: [1023] },
  { field: 'research_provider_min_remaining_credits', inside: [0], outside: [-1] },
  { field: 'research_provider_request_reserve', inside: [0], outside: [-1] },
];

describe('loadConfig: numeric ranges', () => {
  const insideCases = RANGE_CASES.flatMap(({ field, inside }) => inside.map((value) => [field, value] as const));
  const outsideCases = RANGE_CASES.flatMap(({ field, outside }) => outside.map((value) => [field, value] as const));

  it.each(insideCases)('accepts %s = %d', async (field, value) => {
    const config = await configOf(baseConfig({ [field]: value }));
    expect((config as Record<string, unknown>)[field]).toBe(value);
  });

  it.each(outsideCases)('refuses %s = %d', async (field, value) => {
    const problems = await problemsOf(baseConfig({ [field]: value }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${field}: must be (at least|at most|greater than) `));
  });

  it('words the bounds plainly', async () => {
    expect(await problemsOf(baseConfig({ listen_port: 65536 }))).toEqual(['listen_port: must be at most 65535']);
    expect(await problemsOf(baseConfig({ idle_sustain_sec: 29 }))).toEqual(['idle_sustain_sec: must be at least 30']);
    expect(await problemsOf(baseConfig({ dispatch_timeout_sec: 0 }))).toEqual(['dispatch_timeout_sec: must be greater than 0']);
  });

  it.each([
    ['idle_sustain_sec', 30, 29],
    ['cpu_idle_threshold_pct', 100, 100.5],
    ['gpu_idle_avg_threshold_pct', 0, -1],
    ['gpu_idle_peak_threshold_pct', 100, 101],
    ['vram_delta_threshold_mib', 0, -1],
  ] as const)('applies the same range to workload_profiles.*.%s', async (field, inside, outside) => {
    await expect(configOf(baseConfig({ workload_profiles: { training: { [field]: inside } } }))).resolves.toBeDefined();
    const problems = await problemsOf(baseConfig({ workload_profiles: { training: { [field]: outside } } }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^workload_profiles\\.training\\.${field}: must be at (least|most) `));
  });

  it('bounds worker_targets.*.min_memory_available_mib', async () => {
    await expect(
      configOf(baseConfig({ worker_targets: { gpu: gpuTarget({ min_memory_available_mib: 0 }) } })),
    ).resolves.toBeDefined();
    expect(await problemsOf(baseConfig({ worker_targets: { gpu: gpuTarget({ min_memory_available_mib: -1 }) } }))).toEqual([
      'worker_targets.gpu.min_memory_available_mib: must be at least 0',
    ]);
  });

  it.each(['listen_port', 'temporal_ui_port', 'http_max_connections', 'http_max_connections_per_address', 'paper_writer_max_tokens', 'operational_trace_max_payload_bytes'])(
    'requires %s to be an integer',
    async (field) => {
      expect(await problemsOf(baseConfig({ [field]: 2048.5 }))).toEqual([`${field}: must be an integer`]);
    },
  );
});

describe('loadConfig: wrong types', () => {
  it.each([
    ['listen_port', '8787', 'listen_port: must be a number (got string)'],
    ['log_events', 'yes', 'log_events: must be true or false (got string)'],
    ['live_dispatch_enabled', 1, 'live_dispatch_enabled: must be true or false (got number)'],
    ['temporal_ui_enabled', 'no', 'temporal_ui_enabled: must be true or false (got string)'],
    ['listen_host', 80, 'listen_host: must be a string (got number)'],
    ['roles', 'control_plane', 'roles: must be an array (got string)'],
    ['worker_targets', [], 'worker_targets: must be an object (got array)'],
    ['workload_profiles', null, 'workload_profiles: must be an object (got null)'],
    ['default_workload_class', 'gpu', 'default_workload_class: must be one of "unknown", "cpu_only", "gpu_required", "inference_eval", "training", "control_plane", "agent_harness"'],
    ['paper_writer_provider', 'openai', 'paper_writer_provider: must be one of "deterministic", "openai_compatible"'],
  ] as const)('refuses %s = %j', async (field, value, problem) => {
    expect(await problemsOf(baseConfig({ [field]: value }))).toEqual([problem]);
  });

  it('checks array items and their positions', async () => {
    expect(await problemsOf(baseConfig({ roles: ['control_plane', 'scheduler'] }))).toEqual([
      'roles[1]: must be one of "control_plane", "worker_gate", "temporal_worker"',
    ]);
    expect(await problemsOf(baseConfig({ stale_project_process_command_markers: ['codex', 7] }))).toEqual([
      'stale_project_process_command_markers[1]: must be a string (got number)',
    ]);
  });

  it('refuses an empty or repeated roles list', async () => {
    expect(await problemsOf(baseConfig({ roles: [] }))).toEqual(['roles: must not be empty']);
    expect(await problemsOf(baseConfig({ roles: ['control_plane', 'control_plane'] }))).toEqual([
      'roles: must not list a role twice',
    ]);
  });

  it('takes temporal_worker alone, on Postgres and a Temporal of its own address', async () => {
    expect(await problemsOf(baseConfig({ roles: ['temporal_worker', 'worker_gate'], worker_wake_gate_bearer_token: 'gate-token-0123456789abcdef' }))).toEqual([
      'roles: must list temporal_worker alone (a control_plane runs Temporal workers already)',
      'control_plane_store_backend: must be "pg" when roles is temporal_worker (it shares the control planes\' database)',
      'temporal_address: is required when roles is temporal_worker (it joins the control planes\' Temporal)',
    ]);
    const worker = { roles: ['temporal_worker'], control_plane_store_backend: 'pg', pg_database_url: 'postgres://rcp@db.lab/rcp', temporal_address: 'temporal.lab:7233' };
    expect((await configOf(baseConfig(worker))).roles).toEqual(['temporal_worker']);
  });

  it('requires the worker gate token when the process serves the worker_gate role', async () => {
    expect(await problemsOf(baseConfig({ roles: ['worker_gate'] }))).toEqual([
      'worker_wake_gate_bearer_token: is required when roles includes "worker_gate" (it guards the gate\'s own routes)',
    ]);
    const config = await configOf(baseConfig({ roles: ['worker_gate'], worker_wake_gate_bearer_token: 'gate-token-0123456789abcdef' }));
    expect(config.roles).toEqual(['worker_gate']);
  });

  it('checks worker target fields', async () => {
    const problems = await problemsOf(
      baseConfig({ worker_targets: { gpu: { wake_gate_url: 'ssh://gpu', bearer_token: 'short', role: 'tpu_worker' } } }),
    );
    expect(problems).toEqual([
      'worker_targets.gpu.wake_gate_url: must be an http(s) URL with a host',
      'worker_targets.gpu.bearer_token: must be at least 16 characters',
      'worker_targets.gpu.role: must be one of "gpu_worker", "cpu_worker"',
    ]);
  });

  it('checks allowed_hosts entries: a host name or address, optionally with a port, nothing else', async () => {
    const config = await configOf(baseConfig({ allowed_hosts: ['dashboard.lab', 'localhost:8787', '[::1]:8787', '10.0.0.5'] }));
    expect(config.allowed_hosts).toEqual(['dashboard.lab', 'localhost:8787', '[::1]:8787', '10.0.0.5']);
    const problems = await problemsOf(baseConfig({ allowed_hosts: ['http://dashboard.lab', 'dashboard.lab/x', 'dashboard.lab:70000', '', 'a b'] }));
    expect(problems).toEqual([
      'allowed_hosts[0]: must be a host name, optionally with :port (no scheme or path)',
      'allowed_hosts[1]: must be a host name, optionally with :port (no scheme or path)',
      'allowed_hosts[2]: has a port above 65535',
      'allowed_hosts[3]: must be a host name, optionally with :port (no scheme or path)',
      'allowed_hosts[4]: must be a host name, optionally with :port (no scheme or path)',
    ]);
  });

  it('checks worker target names', async () => {
    const problems = await problemsOf(baseConfig({ worker_targets: { '-gpu': gpuTarget(), 'gpu box': gpuTarget() } }));
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/^worker_targets\.-gpu: is not a valid worker target name/);
    expect(problems[1]).toMatch(/^worker_targets\.gpu box: is not a valid worker target name/);
  });
});

describe('loadConfig: deprecated aliases', () => {
  const cases = [
    ['omx_inbound_bearer_token', 'control_api_bearer_token', 'tok_alias_value_0123456789abcdef'],
    ['n8n_callback_url', 'completion_callback_url', 'https://automation.example/webhook/done'],
    ['n8n_bearer_token', 'completion_callback_token', 'tok_callback_alias_0123456789abc'],
    ['n8n_callback_timeout_sec', 'completion_callback_timeout_sec', 45],
  ] as const;

  it.each(cases)('maps %s to %s with a warning', async (alias, field, value) => {
    const raw = baseConfig({ [alias]: value });
    delete raw[field];
    const result = await load(raw);
    if (!result.ok) throw new Error(formatProblems(result.problems));
    expect((result.config as Record<string, unknown>)[field]).toBe(value);
    expect(result.config).not.toHaveProperty(alias);
    const warning = result.warnings.find((w) => w.includes(alias));
    expect(warning).toBeDefined();
    expect(warning).toContain(field);
  });

  it.each(cases)('refuses %s when %s is set to a different value', async (alias, field, value) => {
    const raw = baseConfig({ [alias]: value });
    if (field === 'completion_callback_timeout_sec') raw[field] = 99;
    const problems = await problemsOf(raw);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${alias}: conflicts with ${field}`));
  });

  it('accepts an alias that repeats the same value, with a warning', async () => {
    const result = await load(baseConfig({ omx_inbound_bearer_token: CONTROL_TOKEN }));
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.warnings.some((w) => w.includes('omx_inbound_bearer_token'))).toBe(true);
  });

  it('names the alias when its value is invalid', async () => {
    const raw = baseConfig({ n8n_callback_url: 'ftp://example.com' });
    delete raw.completion_callback_url;
    const problems = await problemsOf(raw);
    expect(problems).toEqual([
      'completion_callback_url: must be an http(s) URL with a host (set through the deprecated n8n_callback_url)',
    ]);
  });
});

describe('loadConfig: placeholders', () => {
  it.each([
    '<CONTROL_API_TOKEN>',
    'replace-with-a-long-random-token',
    'REPLACE_ME',
    'REPLACE_ME_WITH_A_LONG_TOKEN',
    'changeme',
    'CHANGEME',
  ])('refuses control_api_bearer_token %j', async (value) => {
    expect(await problemsOf(baseConfig({ control_api_bearer_token: value }))).toEqual([
      'control_api_bearer_token: is a placeholder; set a real value',
    ]);
  });

  it('refuses placeholders in nested and non-secret fields', async () => {
    const problems = await problemsOf(
      baseConfig({
        worker_wake_gate_url: 'http://<worker_url>:8788',
        worker_targets: { gpu: gpuTarget({ bearer_token: '<WORKER_TOKEN>' }) },
        stale_project_process_command_markers: ['codex', 'replace-with-marker'],
        state_dir: 'changeme',
      }),
    );
    expect(problems).toEqual([
      'state_dir: is a placeholder; set a real value',
      'worker_wake_gate_url: is a placeholder; set a real value',
      'stale_project_process_command_markers[1]: is a placeholder; set a real value',
      'worker_targets.gpu.bearer_token: is a placeholder; set a real value',
    ]);
  });

  it('accepts values that merely contain a placeholder word', async () => {
    const token = 'x_changeme_but_actually_random_0123';
    await expect(configOf(baseConfig({ control_api_bearer_token: token }))).resolves.toMatchObject({
      control_api_bearer_token: token,
    });
  });

  it('lets PAPER_WRITER_API_KEY replace a placeholder in the file', async () => {
    const raw = baseConfig({ paper_writer_api_key: '<PAPER_WRITER_API_KEY>' });
    expect(await problemsOf(raw)).toEqual(['paper_writer_api_key: is a placeholder; set a real value']);
    const config = await configOf(raw, { PAPER_WRITER_API_KEY: 'sk-live-from-environment' });
    expect(config.paper_writer_api_key).toBe('sk-live-from-environment');
  });

  it('refuses a placeholder RESEARCH_PROVIDER_API_KEY', async () => {
    expect(await problemsOf(baseConfig(), { RESEARCH_PROVIDER_API_KEY: 'changeme' })).toEqual([
      'research_provider_api_key: is a placeholder; set a real value (value from environment variable RESEARCH_PROVIDER_API_KEY)',
    ]);
  });
});

describe('loadConfig: unknown fields', () => {
  it('refuses an unknown top-level field', async () => {
    expect(await problemsOf(baseConfig({ listen_hots: '127.0.0.1' }))).toEqual(['listen_hots: unknown field']);
  });

  it('refuses unknown fields inside worker targets and profiles', async () => {
    const problems = await problemsOf(
      baseConfig({
        worker_targets: { gpu: gpuTarget({ ssh_host: 'gpu.lan' }) },
        workload_profiles: { training: { idle_secs: 100 }, heavy_gpu: {} },
      }),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        'worker_targets.gpu.ssh_host: unknown field',
        'workload_profiles.training.idle_secs: unknown field',
        'workload_profiles.heavy_gpu: is not a workload class',
      ]),
    );
    expect(problems).toHaveLength(3);
  });

  it('refuses research_provider_api_key in the file', async () => {
    const problems = await problemsOf(baseConfig({ research_provider_api_key: 'sk-from-file-0123456789' }));
    expect(problems).toEqual([
      'research_provider_api_key: must not be in the config file; set the RESEARCH_PROVIDER_API_KEY environment variable',
    ]);
  });
});

describe('loadConfig: store backends', () => {
  it('normalizes sqlite to embedded', async () => {
    expect((await configOf(baseConfig({ control_plane_store_backend: 'sqlite' }))).control_plane_store_backend).toBe('embedded');
  });

  it.each(['pg', 'pg_readonly'])('requires pg_database_url for %s', async (backend) => {
    expect(await problemsOf(baseConfig({ control_plane_store_backend: backend }))).toEqual([
      `pg_database_url: is required when control_plane_store_backend is "${backend}"`,
    ]);
    const config = await configOf(
      baseConfig({ control_plane_store_backend: backend, pg_database_url: 'postgresql://svc:pw@db.lan:5432/control' }),
    );
    expect(config.control_plane_store_backend).toBe(backend);
  });

  it('accepts postgres:// and refuses other schemes', async () => {
    await expect(
      configOf(baseConfig({ control_plane_store_backend: 'pg', pg_database_url: 'postgres://db.lan/control' })),
    ).resolves.toBeDefined();
    expect(
      await problemsOf(baseConfig({ control_plane_store_backend: 'pg', pg_database_url: 'mysql://db.lan/control' })),
    ).toEqual(['pg_database_url: must be a postgres:// or postgresql:// URL']);
  });

  it('refuses an unknown backend', async () => {
    expect(await problemsOf(baseConfig({ control_plane_store_backend: 'mongo' }))).toEqual([
      'control_plane_store_backend: must be one of "embedded", "pg", "pg_readonly", "sqlite"',
    ]);
  });
});

describe('loadConfig: cross-field rules', () => {
  it('refuses a workload machine target that is not a worker target', async () => {
    const problems = await problemsOf(
      baseConfig({ worker_targets: { 'gpu-1': gpuTarget() }, workload_machine_targets: { gpu_required: 'gpu-2' } }),
    );
    expect(problems).toEqual([
      'workload_machine_targets.gpu_required: names worker target "gpu-2", which is not defined in worker_targets',
    ]);
  });

  it('refuses a workload machine target keyed by an unknown class', async () => {
    expect(
      await problemsOf(baseConfig({ worker_targets: { cpu: gpuTarget() }, workload_machine_targets: { batch: 'cpu' } })),
    ).toEqual(['workload_machine_targets.batch: is not a workload class']);
  });

  it.each([
    [{ push_alerts_enabled: true }, ['push_app_token', 'push_user_key', 'push_api_url'], 'push_alerts_enabled is true'],
    [{ chat_alert_webhook_enabled: true }, ['chat_alert_webhook_url'], 'chat_alert_webhook_enabled is true'],
    [
      { paper_evidence_sync_enabled: true },
      ['paper_evidence_sync_ssh_host', 'paper_evidence_sync_remote_root'],
      'paper_evidence_sync_enabled is true',
    ],
    [
      { paper_writer_provider: 'openai_compatible' },
      ['paper_writer_base_url', 'paper_writer_model'],
      'paper_writer_provider is "openai_compatible"',
    ],
    [{ temporal_tls_client_cert_path: '/etc/rcp/client.pem' }, ['temporal_tls_client_key_path'], 'temporal_tls_client_cert_path is set (a client certificate needs its key)'],
    [{ temporal_tls_client_key_path: '/etc/rcp/client.key' }, ['temporal_tls_client_cert_path'], 'temporal_tls_client_key_path is set'],
  ] as const)('%j requires its companion fields', async (extra, fields, condition) => {
    expect(await problemsOf(baseConfig({ ...extra }))).toEqual(fields.map((f) => `${f}: is required when ${condition}`));
  });

  it('accepts enabled features with their companion fields', async () => {
    const config = await configOf(
      baseConfig({
        push_alerts_enabled: true,
        push_app_token: 'app-token-value',
        push_user_key: 'user-key-value',
        push_api_url: 'https://push.example/1/messages.json',
        paper_writer_provider: 'openai_compatible',
        paper_writer_base_url: 'http://127.0.0.1:11434/v1',
        paper_writer_model: 'local-model',
      }),
    );
    expect(config.push_alerts_enabled).toBe(true);
    expect(config.paper_writer_base_url).toBe('http://127.0.0.1:11434/v1');
  });

  it('lists every problem together, field and cross-field alike', async () => {
    const raw = baseConfig({
      listen_port: 70000,
      log_events: 'no',
      paper_writer_max_tokens: 1.5,
      extra_field: true,
      completion_callback_token: '<CALLBACK_TOKEN>',
      control_plane_store_backend: 'pg',
      workload_machine_targets: { cpu_only: 'cpu-box' },
    });
    delete raw.project_root;
    const problems = await problemsOf(raw);
    expect(problems).toEqual(
      expect.arrayContaining([
        'listen_port: must be at most 65535',
        'log_events: must be true or false (got string)',
        'paper_writer_max_tokens: must be an integer',
        'extra_field: unknown field',
        'completion_callback_token: is a placeholder; set a real value',
        'project_root: is required',
        'pg_database_url: is required when control_plane_store_backend is "pg"',
        'workload_machine_targets.cpu_only: names worker target "cpu-box", which is not defined in worker_targets',
      ]),
    );
    expect(problems).toHaveLength(8);
    const text = formatProblems(problems);
    expect(text).toContain('8 problems');
    for (const problem of problems) expect(text).toContain(problem);
  });
});

describe('loadConfig: paths and file location', () => {
  it('resolves relative paths against the config file directory, not cwd', async () => {
    const dir = await tempDir();
    const configDir = join(dir, 'etc', 'rcp');
    await mkdir(configDir, { recursive: true });
    const path = await writeJson(
      join(configDir, 'config.json'),
      baseConfig({
        state_dir: 'state',
        project_root: '../projects',
        dispatch_script_path: '/opt/rcp/dispatch.sh',
        route_observability_log_path: 'logs/routes.jsonl',
        operational_trace_log_path: '',
      }),
    );
    const result = loadConfig({ env: { SVC_CONFIG: path }, cwd: join(dir, 'elsewhere') });
    if (!result.ok) throw new Error(formatProblems(result.problems));
    expect(result.configPath).toBe(path);
    expect(result.config.state_dir).toBe(join(configDir, 'state'));
    expect(result.config.project_root).toBe(join(dir, 'etc', 'projects'));
    expect(result.config.dispatch_script_path).toBe('/opt/rcp/dispatch.sh');
    expect(result.config.route_observability_log_path).toBe(join(configDir, 'logs', 'routes.jsonl'));
    expect(result.config.operational_trace_log_path).toBe('');
  });

  it('prefers SVC_CONFIG over SVC_CONTROL_PLANE_CONFIG', async () => {
    const dir = await tempDir();
    const primary = await writeJson(join(dir, 'primary.json'), baseConfig({ listen_port: 1111 }));
    const secondary = await writeJson(join(dir, 'secondary.json'), baseConfig({ listen_port: 2222 }));

    const both = loadConfig({ env: { SVC_CONFIG: primary, SVC_CONTROL_PLANE_CONFIG: secondary }, cwd: dir });
    expect(both.ok && both.config.listen_port).toBe(1111);
    expect(both.configPath).toBe(primary);

    const onlySecondary = loadConfig({ env: { SVC_CONTROL_PLANE_CONFIG: secondary }, cwd: dir });
    expect(onlySecondary.ok && onlySecondary.config.listen_port).toBe(2222);
  });

  it('resolves a relative SVC_CONFIG against cwd', async () => {
    const dir = await tempDir();
    await writeJson(join(dir, 'custom.json'), baseConfig());
    const result = loadConfig({ env: { SVC_CONFIG: 'custom.json' }, cwd: dir });
    expect(result.ok).toBe(true);
    expect(result.configPath).toBe(join(dir, 'custom.json'));
  });

  it('reports a missing explicit config file without creating one', async () => {
    const dir = await tempDir();
    const result = loadConfig({ env: { SVC_CONFIG: join(dir, 'missing.json') }, cwd: dir });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.problems).toEqual([`${join(dir, 'missing.json')}: config file not found (from SVC_CONFIG)`]);
    await expect(stat(join(dir, 'state', 'config.json'))).rejects.toThrow();
  });

  it('reports JSON syntax errors with a position and without quoting the file', async () => {
    const problems = await problemsOf('{\n  "control_api_bearer_token": "s3cret-token-value-123" oops\n}');
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/config\.json: invalid JSON: .* at line 2 column \d+$/);
    expect(problems[0]).not.toContain('s3cret');
  });

  it('refuses a file whose top level is not an object', async () => {
    const problems = await problemsOf([baseConfig()]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/config\.json: must contain a JSON object \(got array\)$/);
  });
});

describe('loadConfig: environment', () => {
  it('lets TEMPORAL_ADDRESS override temporal_address', async () => {
    const raw = baseConfig({ temporal_address: 'temporal.lan:7233' });
    expect((await configOf(raw)).temporal_address).toBe('temporal.lan:7233');
    expect((await configOf(raw, { TEMPORAL_ADDRESS: '127.0.0.1:7233' })).temporal_address).toBe('127.0.0.1:7233');
    expect((await configOf(baseConfig(), { TEMPORAL_ADDRESS: 'temporal.lan:7233' })).temporal_address).toBe('temporal.lan:7233');
  });

  it('exposes RESEARCH_PROVIDER_API_KEY as research_provider_api_key', async () => {
    const config = await configOf(baseConfig(), { RESEARCH_PROVIDER_API_KEY: 'rp-key-from-environment' });
    expect(config.research_provider_api_key).toBe('rp-key-from-environment');
  });
});

describe('loadConfig: a config file other users can read', () => {
  it('loads, warning that the file holds the tokens and should be chmod 600', async () => {
    const dir = await tempDir();
    const path = await writeJson(join(dir, 'config.json'), baseConfig());
    await chmod(path, 0o644);
    const exposed = loadConfig({ env: { SVC_CONFIG: path }, cwd: dir });
    if (!exposed.ok) throw new Error(formatProblems(exposed.problems));
    expect(exposed.warnings).toContainEqual(expect.stringMatching(/readable or writable by other users \(mode 644\).*chmod 600/));
    expect(exposed.warnings.join('\n')).not.toContain(CONTROL_TOKEN);
    await chmod(path, 0o600);
    const kept = loadConfig({ env: { SVC_CONFIG: path }, cwd: dir });
    if (!kept.ok) throw new Error(formatProblems(kept.problems));
    expect(kept.warnings.filter((warning) => warning.includes('chmod 600'))).toEqual([]);
  });
});

describe('loadConfig: first run', () => {
  it('creates a private loopback config with both roles and a random token, once', async () => {
    const cwd = await tempDir();
    const first = loadConfig({ env: {}, cwd });
    if (!first.ok) throw new Error(formatProblems(first.problems));
    const configPath = join(cwd, 'state', 'config.json');
    expect(first.configPath).toBe(configPath);
    expect(first.firstRun?.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(first.config.control_api_bearer_token).toBe(first.firstRun?.token);
    expect(first.config.completion_callback_token).not.toBe(first.firstRun?.token);
    expect(first.config).toMatchObject({
      listen_host: '127.0.0.1',
      listen_port: 8787,
      roles: ['control_plane', 'worker_gate'],
      live_dispatch_enabled: false,
      control_plane_store_backend: 'embedded',
      temporal_address: '',
      state_dir: join(cwd, 'state'),
      project_root: join(cwd, 'state', 'projects'),
      allowed_hosts: ['localhost'],
    });
    expect(first.warnings.filter((warning) => warning.includes('chmod 600'))).toEqual([]);
    expect(isAbsolute(first.config.dispatch_script_path ?? '')).toBe(true);
    expect(first.config.dispatch_script_path).toMatch(/worker-gate[/\\]simulated-agent\.sh$/);
    expect((await stat(configPath)).mode & 0o777).toBe(0o600);

    const before = await readFile(configPath, 'utf8');
    const second = loadConfig({ env: {}, cwd });
    if (!second.ok) throw new Error(formatProblems(second.problems));
    expect(second.firstRun).toBeUndefined();
    expect(second.config.control_api_bearer_token).toBe(first.firstRun?.token);
    expect(await readFile(configPath, 'utf8')).toBe(before);
  });

  it('generates different tokens for different installs', async () => {
    const a = loadConfig({ env: {}, cwd: await tempDir() });
    const b = loadConfig({ env: {}, cwd: await tempDir() });
    expect(a.ok && b.ok).toBe(true);
    if (a.ok && b.ok) expect(a.firstRun?.token).not.toBe(b.firstRun?.token);
  });

  it('moves every address of the first-run config with listen_port alone, or with RCP_LISTEN_PORT', async () => {
    const cwd = await tempDir();
    const first = loadConfig({ env: {}, cwd });
    if (!first.ok) throw new Error(formatProblems(first.problems));
    expect(first.config).toMatchObject({ worker_wake_gate_url: 'http://127.0.0.1:8787', completion_callback_url: 'http://127.0.0.1:8787/control/api/worker-callback' });
    expect(await readFile(join(cwd, 'state', 'config.json'), 'utf8')).not.toContain('8787/');

    const fromEnv = loadConfig({ env: { RCP_LISTEN_PORT: '8791' }, cwd });
    if (!fromEnv.ok) throw new Error(formatProblems(fromEnv.problems));
    expect(fromEnv.config).toMatchObject({ listen_port: 8791, worker_wake_gate_url: 'http://127.0.0.1:8791', completion_callback_url: 'http://127.0.0.1:8791/control/api/worker-callback' });

    const configPath = join(cwd, 'state', 'config.json');
    await writeFile(configPath, JSON.stringify({ ...JSON.parse(await readFile(configPath, 'utf8')), listen_port: 8792 }));
    const edited = loadConfig({ env: {}, cwd });
    if (!edited.ok) throw new Error(formatProblems(edited.problems));
    expect(edited.config).toMatchObject({ listen_port: 8792, worker_wake_gate_url: 'http://127.0.0.1:8792', completion_callback_url: 'http://127.0.0.1:8792/control/api/worker-callback' });

    const refused = loadConfig({ env: { RCP_LISTEN_PORT: 'eighty' }, cwd });
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.problems).toContainEqual('listen_port: must be a number (got string) (value from environment variable RCP_LISTEN_PORT)');
  });

  it('warns when a config of both roles names its own URLs on another port than listen_port', async () => {
    const cwd = await tempDir();
    await mkdir(join(cwd, 'state'));
    // As an earlier release wrote the first-run config, with listen_port moved alone.
    const older = { ...baseConfig({ listen_port: 8788 }), roles: ['control_plane', 'worker_gate'], worker_wake_gate_url: 'http://127.0.0.1:8787', worker_wake_gate_bearer_token: 'older-gate-token-0123456789abcdef', completion_callback_url: 'http://127.0.0.1:8787/control/api/worker-callback' };
    await writeJson(join(cwd, 'state', 'config.json'), older);
    const result = loadConfig({ env: {}, cwd });
    if (!result.ok) throw new Error(formatProblems(result.problems));
    expect(result.warnings).toContain('worker_wake_gate_url names port 8787 on this machine, but listen_port is 8788: leave worker_wake_gate_url out of the file to have it follow listen_port');
    expect(result.warnings).toContain('completion_callback_url names port 8787 on this machine, but listen_port is 8788: leave completion_callback_url out of the file to have it follow listen_port');
    await writeJson(join(cwd, 'state', 'config.json'), { ...older, listen_port: 8787 });
    const matching = loadConfig({ env: {}, cwd });
    if (!matching.ok) throw new Error(formatProblems(matching.problems));
    expect(matching.warnings.filter((warning) => warning.includes('follow listen_port'))).toEqual([]);
  });

  it('uses an existing state/config.json instead of writing one', async () => {
    const cwd = await tempDir();
    await mkdir(join(cwd, 'state'));
    await writeJson(join(cwd, 'state', 'config.json'), baseConfig({ listen_port: 9999 }));
    const result = loadConfig({ env: {}, cwd });
    if (!result.ok) throw new Error(formatProblems(result.problems));
    expect(result.firstRun).toBeUndefined();
    expect(result.config.listen_port).toBe(9999);
  });
});

describe('config field docs and secrets', () => {
  it('documents every field, with the five required ones marked', () => {
    const docs = configFieldDocs();
    expect(docs.map((d) => d.name)).toEqual(Object.keys(ConfigFieldsSchema.shape));
    expect(docs.filter((d) => d.required).map((d) => d.name)).toEqual([...REQUIRED_FIELDS]);
    for (const d of docs) expect(d.description, d.name).not.toBe('');
    expect(docs.find((d) => d.name === 'listen_port')).toMatchObject({ type: 'integer 0–65535', default: '8787' });
    expect(docs.find((d) => d.name === 'control_api_bearer_token')?.secret).toBe(true);
  });

  it('lists secret fields and redacts them', async () => {
    expect(SECRET_FIELDS).toEqual(
      expect.arrayContaining([
        'control_api_bearer_token',
        'completion_callback_token',
        'worker_wake_gate_bearer_token',
        'push_app_token',
        'push_user_key',
        'chat_alert_webhook_secret',
        'paper_writer_api_key',
        'pg_database_url',
        'research_provider_api_key',
      ]),
    );
    const config = await configOf(baseConfig({ worker_targets: { gpu: gpuTarget() } }));
    const text = JSON.stringify(redactConfig(config));
    for (const secret of [CONTROL_TOKEN, CALLBACK_TOKEN, WORKER_TOKEN]) expect(text).not.toContain(secret);
  });

  it('keeps the configuration reference check honest', async () => {
    const dir = await tempDir();
    const page = join(dir, 'configuration.md');
    await writeFile(page, `# Title\n\n${START_MARKER}\nstale\n${END_MARKER}\n`);
    expect(generateDocs(['--check', '--doc', page])).toBe(1);
    expect(generateDocs(['--doc', page])).toBe(0);
    expect(generateDocs(['--check', '--doc', page])).toBe(0);
    const text = await readFile(page, 'utf8');
    expect(text).toContain(renderConfigReference());
    expect(text).toContain('| `control_api_bearer_token` |');
  });

  it('docs/configuration.md carries the current reference (run npm run docs:config after a schema change)', () => {
    expect(generateDocs(['--check'])).toBe(0);
  });
});
