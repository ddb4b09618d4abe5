import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { z } from 'zod';
import { firstRunConfigPath, writeFirstRunConfig } from './first-run.ts';
import {
  ConfigFieldsSchema,
  ConfigFileSchema,
  DEPRECATED_ALIASES,
  ENV_ONLY_FIELDS,
  ENV_OVERRIDES,
  PLACEHOLDER_REASON,
  isPlaceholder,
} from './schema.ts';
import type { Config } from './schema.ts';

export type ConfigEnv = Readonly<Record<string, string | undefined>>;

export type LoadConfigOptions = {
  env?: ConfigEnv;
  cwd?: string;
};

export type LoadConfigResult =
  | { ok: true; config: Config; configPath: string; warnings: string[]; firstRun?: { token: string } }
  | { ok: false; configPath?: string; problems: string[] };

/** Fields holding filesystem paths; relative values resolve against the config file's directory. */
const PATH_FIELDS = [
  'state_dir',
  'project_root',
  'dispatch_script_path',
  'route_observability_log_path',
  'operational_trace_log_path',
  'temporal_tls_server_ca_cert_path',
  'temporal_tls_client_cert_path',
  'temporal_tls_client_key_path',
  'run_cgroup_v2_root',
] as const;

/** Fields holding lists of paths, resolved the same way. */
const PATH_LIST_FIELDS = ['agent_read_only_paths', 'agent_writable_paths'] as const;

type Issue = z.core.$ZodIssue;
type RawConfig = Record<string, unknown>;

function isRecord(value: unknown): value is RawConfig {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? String(segment) : `.${String(segment)}`;
  }
  return out === '' ? '(config)' : out;
}

function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

const EXPECTED_TEXT: Record<string, string> = {
  int: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  array: 'an array',
  object: 'an object',
  record: 'an object',
};

function unknownFieldReason(parent: readonly PropertyKey[], key: string): string {
  const container = parent.length === 1 ? parent[0] : undefined;
  if (container === 'workload_profiles' || container === 'workload_machine_targets' || container === 'workload_run_needs') {
    return 'is not a workload class';
  }
  if (parent.length === 0 && key === 'research_provider_api_key') {
    return 'must not be in the config file; set the RESEARCH_PROVIDER_API_KEY environment variable';
  }
  return 'unknown field';
}

/** The raw value at an issue's path; zod's issues do not carry it unless asked to. */
function valueAt(raw: RawConfig, path: readonly PropertyKey[]): unknown {
  let value: unknown = raw;
  for (const segment of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[segment];
  }
  return value;
}

function issueReason(issue: Issue, input: unknown): string {
  switch (issue.code) {
    case 'invalid_type': {
      if (input === undefined) return 'is required';
      if (issue.expected === 'int' && typeof input === 'number') return 'must be an integer';
      const expected = EXPECTED_TEXT[issue.expected] ?? issue.expected;
      return `must be ${expected} (got ${jsonTypeOf(input)})`;
    }
    case 'too_small': {
      const min = String(issue.minimum);
      if (issue.origin === 'string') return min === '1' ? 'must not be empty' : `must be at least ${min} characters`;
      if (issue.origin === 'array') return min === '1' ? 'must not be empty' : `must have at least ${min} items`;
      return issue.inclusive ? `must be at least ${min}` : `must be greater than ${min}`;
    }
    case 'too_big': {
      const max = String(issue.maximum);
      if (issue.origin === 'string') return `must be at most ${max} characters`;
      if (issue.origin === 'array') return `must have at most ${max} items`;
      return issue.inclusive ? `must be at most ${max}` : `must be less than ${max}`;
    }
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_key':
      return issue.issues.map((inner) => inner.message).join('; ');
    default:
      return issue.message;
  }
}

function issueProblems(issue: Issue, raw: RawConfig, notes: ReadonlyMap<string, string>): string[] {
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => `${formatPath([...issue.path, key])}: ${unknownFieldReason(issue.path, key)}`);
  }
  const top = issue.path[0];
  const note = typeof top === 'string' ? notes.get(top) : undefined;
  return [`${formatPath(issue.path)}: ${issueReason(issue, valueAt(raw, issue.path))}${note ? ` (${note})` : ''}`];
}

function schemaProblems(issues: readonly Issue[], raw: RawConfig, notes: ReadonlyMap<string, string>): string[] {
  // "too short" or "not a URL" adds nothing when the value is a placeholder.
  const placeholderPaths = new Set(
    issues.filter((issue) => issue.code === 'custom' && issue.message === PLACEHOLDER_REASON).map((issue) => formatPath(issue.path)),
  );
  return issues
    .filter((issue) => !placeholderPaths.has(formatPath(issue.path)) || issue.message === PLACEHOLDER_REASON)
    .flatMap((issue) => issueProblems(issue, raw, notes));
}

// Parser messages can quote a slice of the file, which may contain a secret; keep only the
// reason and report the position as line and column.
function jsonSyntaxProblem(configPath: string, text: string, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const position = /at position (\d+)/.exec(message);
  let reason = message
    .replace(/\s+in JSON at position.*$/s, '')
    .replace(/,\s*".*" is not valid JSON$/s, '');
  if (position) {
    const before = text.slice(0, Number(position[1]));
    const line = before.split('\n').length;
    const column = before.length - before.lastIndexOf('\n');
    reason += ` at line ${line} column ${column}`;
  }
  return `${configPath}: invalid JSON: ${reason}`;
}

type ConfigSource = { path: string; variable?: string };

function locateConfig(env: ConfigEnv, cwd: string): ConfigSource {
  for (const variable of ['SVC_CONFIG', 'SVC_CONTROL_PLANE_CONFIG']) {
    const value = env[variable];
    if (value) return { path: resolve(cwd, value), variable };
  }
  return { path: firstRunConfigPath(cwd) };
}

function readConfigText(source: ConfigSource): { text: string } | { problem: string } {
  try {
    return { text: readFileSync(source.path, 'utf8') };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    const from = source.variable ? ` (from ${source.variable})` : '';
    const reason = code === 'ENOENT' ? 'config file not found' : `cannot read config file (${code})`;
    return { problem: `${source.path}: ${reason}${from}` };
  }
}

/** Moves deprecated alias values to their current names, recording warnings and conflicts. */
function applyAliases(raw: RawConfig, warnings: string[], problems: string[], notes: Map<string, string>): void {
  for (const [alias, field] of Object.entries(DEPRECATED_ALIASES)) {
    if (!Object.hasOwn(raw, alias)) continue;
    const value = raw[alias];
    delete raw[alias];
    warnings.push(`${alias} is deprecated; use ${field} instead`);
    if (!Object.hasOwn(raw, field)) {
      raw[field] = value;
      notes.set(field, `set through the deprecated ${alias}`);
    } else if (!isDeepStrictEqual(raw[field], value)) {
      problems.push(`${alias}: conflicts with ${field}, which is set to a different value; remove ${alias}`);
    }
  }
}

function applyEnvOverrides(raw: RawConfig, env: ConfigEnv, notes: Map<string, string>): void {
  for (const [variable, field] of Object.entries(ENV_OVERRIDES)) {
    const value = env[variable];
    if (!value) continue;
    // The only numeric one: a number it reads as stays a number, anything else is refused by the schema.
    raw[field] = field === 'listen_port' && /^\d+$/.test(value.trim()) ? Number(value) : value;
    notes.set(field, `value from environment variable ${variable}`);
  }
}

/**
 * Where one process serves both the control plane and the worker gate, the callback URL and the gate URL left out of
 * the file are its own address, so that listen_port (or RCP_LISTEN_PORT) alone moves all three.
 */
function applyOwnUrls(raw: RawConfig, notes: Map<string, string>): void {
  const roles = raw.roles;
  if (!Array.isArray(roles) || !roles.includes('control_plane') || !roles.includes('worker_gate')) return;
  const port = raw.listen_port ?? ConfigFieldsSchema.shape.listen_port.parse(undefined);
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
    for (const field of ['worker_wake_gate_url', 'completion_callback_url']) notes.set(field, 'it follows listen_port, which is not a port this process can name');
    return;
  }
  const host = typeof raw.listen_host === 'string' ? raw.listen_host : ConfigFieldsSchema.shape.listen_host.parse(undefined);
  const own = `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host}:${port}`;
  const note = `this process's own address, from listen_host and listen_port`;
  if (!Object.hasOwn(raw, 'worker_wake_gate_url')) {
    raw.worker_wake_gate_url = own;
    notes.set('worker_wake_gate_url', note);
  }
  if (!Object.hasOwn(raw, 'completion_callback_url')) {
    raw.completion_callback_url = `${own}/control/api/worker-callback`;
    notes.set('completion_callback_url', note);
  }
}

function envOnlyFields(env: ConfigEnv, problems: string[]): { research_provider_api_key: string | undefined } {
  const variable = 'RESEARCH_PROVIDER_API_KEY' satisfies keyof typeof ENV_ONLY_FIELDS;
  const value = env[variable] || undefined;
  if (value !== undefined && isPlaceholder(value)) {
    problems.push(`${ENV_ONLY_FIELDS[variable]}: ${PLACEHOLDER_REASON} (value from environment variable ${variable})`);
  }
  return { research_provider_api_key: value };
}

function resolvePaths(config: Config, configDir: string): Config {
  const out = { ...config };
  for (const field of PATH_FIELDS) {
    // Empty log paths mean "not set" and stay empty.
    const value = out[field];
    if (value !== undefined && value !== '') out[field] = resolve(configDir, value);
  }
  for (const field of PATH_LIST_FIELDS) out[field] = out[field].map((value) => resolve(configDir, value));
  return out;
}

/** `path`'s permission bits when users other than its owner may use it beyond `allowed`, or null (also when it does not exist). */
function exposedMode(path: string, allowed = 0): number | null {
  try {
    const mode = statSync(path).mode & 0o777;
    return (mode & 0o077 & ~allowed) === 0 ? null : mode;
  } catch {
    return null;
  }
}

/** The file holds every token of this install: other users of the machine (agents among them) must not read it. */
function exposureWarning(configPath: string): string | undefined {
  const mode = exposedMode(configPath);
  if (mode === null) return undefined;
  return `${configPath} is readable or writable by other users (mode ${mode.toString(8)}); it holds this install's tokens: chmod 600 it`;
}

/** Where the operational trace is written: operational_trace_log_path, or a file under state_dir when it is empty. */
export function operationalTracePath(config: Pick<Config, 'operational_trace_log_path' | 'state_dir'>): string {
  return config.operational_trace_log_path || join(config.state_dir, 'operational-trace.jsonl');
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * A config of an earlier release names this process's own URLs with their port: moving listen_port alone then sends
 * the callbacks and the gate's calls to whatever else holds the old port. Said at start, with the fix.
 */
function ownUrlWarnings(config: Config): string[] {
  if (!config.roles.includes('control_plane') || !config.roles.includes('worker_gate') || config.listen_port === 0) return [];
  const warnings: string[] = [];
  for (const field of ['worker_wake_gate_url', 'completion_callback_url'] as const) {
    const value = config[field];
    if (!value) continue;
    const url = new URL(value);
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    if ((LOOPBACK_HOSTS.has(url.hostname) || url.hostname === config.listen_host) && port !== config.listen_port) {
      warnings.push(
        `${field} names port ${port} on this machine, but listen_port is ${config.listen_port}: leave ${field} out of the file to have it follow listen_port`,
      );
    }
  }
  return warnings;
}

function collectWarnings(config: Config, configPath: string, env: ConfigEnv): string[] {
  const warnings: string[] = [...ownUrlWarnings(config)];
  const exposure = exposureWarning(configPath);
  if (exposure) warnings.push(exposure);
  // The gate opens state_dir to pass through, never to list, on the way to its agents' homes (worker-gate/agent-sandbox).
  const stateDirMode = exposedMode(config.state_dir, 0o011);
  if (stateDirMode !== null) {
    warnings.push(`state_dir ${config.state_dir} was open to other users (mode ${stateDirMode.toString(8)}); it holds the run records and the embedded database: made 0700`);
  }
  if (config.roles.includes('worker_gate') && config.dispatch_script_path !== undefined && !existsSync(config.dispatch_script_path)) {
    warnings.push(`dispatch_script_path: ${config.dispatch_script_path} does not exist`);
  }
  if (config.operational_trace_enabled) {
    const promptText = config.operational_trace_redact_prompt_text ? 'redacted' : 'NOT redacted (operational_trace_redact_prompt_text is false)';
    warnings.push(
      `operational_trace_enabled: request and response payloads of command routes (every method but GET) and of calls to worker gates ` +
        `are written to ${operationalTracePath(config)}, up to ${config.operational_trace_max_payload_bytes} bytes each, ` +
        `with secrets redacted and prompt_text ${promptText}; keep disabled unless intended`,
    );
  }
  return warnings;
}

/**
 * Finds, reads and validates the config file. With neither SVC_CONFIG nor
 * SVC_CONTROL_PLANE_CONFIG set, `<cwd>/state/config.json` is used and created on first run.
 * Every problem found is reported, each as "<field path>: <reason>".
 */
export function loadConfig(options: LoadConfigOptions = {}): LoadConfigResult {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const source = locateConfig(env, cwd);
  const configPath = source.path;

  let firstRun: { token: string } | undefined;
  if (!source.variable) {
    try {
      const created = writeFirstRunConfig(cwd);
      if (created) firstRun = { token: created.token };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      return { ok: false, configPath, problems: [`${configPath}: cannot create first-run config (${code})`] };
    }
  }

  const read = readConfigText(source);
  if ('problem' in read) return { ok: false, configPath, problems: [read.problem] };
  const text = read.text.replace(/^\uFEFF/, '');

  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    return { ok: false, configPath, problems: [jsonSyntaxProblem(configPath, text, error)] };
  }
  if (!isRecord(raw)) {
    return { ok: false, configPath, problems: [`${configPath}: must contain a JSON object (got ${jsonTypeOf(raw)})`] };
  }

  const warnings: string[] = [];
  const problems: string[] = [];
  const notes = new Map<string, string>();
  applyAliases(raw, warnings, problems, notes);
  applyEnvOverrides(raw, env, notes);
  applyOwnUrls(raw, notes);
  const envOnly = envOnlyFields(env, problems);

  const parsed = ConfigFileSchema.safeParse(raw);
  if (!parsed.success) problems.push(...schemaProblems(parsed.error.issues, raw, notes));
  if (!parsed.success || problems.length > 0) {
    return { ok: false, configPath, problems: [...new Set(problems)] };
  }

  const config = resolvePaths({ ...parsed.data, ...envOnly }, dirname(configPath));
  warnings.push(...collectWarnings(config, configPath, env));
  return firstRun
    ? { ok: true, config, configPath, warnings, firstRun }
    : { ok: true, config, configPath, warnings };
}

/** Text for stderr: one line per problem. */
export function formatProblems(problems: readonly string[]): string {
  const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
  return [`Invalid configuration (${count}):`, ...problems.map((p) => `  - ${p}`)].join('\n') + '\n';
}
