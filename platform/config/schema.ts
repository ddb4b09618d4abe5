import { z } from 'zod';
import { AGENT_RUNTIMES } from '../../worker-gate/contract/agent-runtimes.ts';
import { AGENT_NAME_PATTERN, AGENT_NAME_RULE, REASONING_EFFORTS } from '../../worker-gate/contract/gate-names.ts';
import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';
import type { GateThresholdProfile } from '../../worker-gate/contract/workload.ts';

export const ROLES = ['control_plane', 'worker_gate', 'temporal_worker'] as const;
export type Role = (typeof ROLES)[number];

export const WORKER_TARGET_ROLES = ['gpu_worker', 'cpu_worker'] as const;
export const STORE_BACKENDS = ['embedded', 'pg', 'pg_readonly'] as const;
export const PAPER_WRITER_PROVIDERS = ['deterministic', 'openai_compatible'] as const;
export const WORKER_TARGET_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
export const MIN_TOKEN_LENGTH = 16;

/** Old field name → current field name. Each use is accepted with a warning. */
export const DEPRECATED_ALIASES = {
  omx_inbound_bearer_token: 'control_api_bearer_token',
  n8n_callback_url: 'completion_callback_url',
  n8n_bearer_token: 'completion_callback_token',
  n8n_callback_timeout_sec: 'completion_callback_timeout_sec',
} as const;

/** Environment variable → config field it overrides. */
export const ENV_OVERRIDES = {
  TEMPORAL_ADDRESS: 'temporal_address',
  PAPER_WRITER_API_KEY: 'paper_writer_api_key',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'otel_exporter_otlp_endpoint',
  RCP_LISTEN_PORT: 'listen_port',
} as const;

/** Environment variable → normalized config field that only the environment can set. */
export const ENV_ONLY_FIELDS = {
  RESEARCH_PROVIDER_API_KEY: 'research_provider_api_key',
} as const;

export const PLACEHOLDER_REASON = 'is a placeholder; set a real value';
const HTTP_URL_REASON = 'must be an http(s) URL with a host';

/**
 * True for values copied unchanged from an example config: `<TOKEN>` (alone or inside a
 * longer value such as `http://<worker_url>`), `replace-with-...`, `REPLACE_ME...`, `changeme`.
 */
export function isPlaceholder(value: string): boolean {
  const v = value.trim();
  const lower = v.toLowerCase();
  return (
    (v.startsWith('<') && v.endsWith('>')) ||
    /<[A-Za-z][A-Za-z0-9_-]*>/.test(v) ||
    lower.startsWith('replace-with-') ||
    lower.startsWith('replace_me') ||
    lower === 'changeme'
  );
}

export function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

function isPostgresUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'postgres:' || url.protocol === 'postgresql:';
  } catch {
    return false;
  }
}

type FieldMeta = {
  description: string;
  secret?: boolean;
  /**
   * The field may differ between control-plane replicas of one cluster: it names something of the replica's own machine
   * (where it listens, its files, paths and programs, how it reaches shared services, where a gate it serves posts its
   * callbacks). Every other field must be the same on all of them (docs/operations.md#running-on-several-machines).
   */
  perReplica?: boolean;
  /** Environment variable that overrides the file value. */
  env?: string;
};

function doc<T extends z.ZodType>(schema: T, meta: FieldMeta): T {
  return schema.meta(meta);
}

// Every string in the file goes through this, so placeholders are refused wherever they
// appear. No `abort`: an aborting issue would also stop the root cross-field check, so a
// placeholder may come with further issues on the same path (loadConfig keeps only this one).
const text = () => z.string().refine((v) => !isPlaceholder(v), PLACEHOLDER_REASON);
const nonEmptyText = () => text().min(1);
const token = () => text().min(MIN_TOKEN_LENGTH);
const optionalToken = () =>
  text()
    .refine((v) => v === '' || v.length >= MIN_TOKEN_LENGTH, `must be at least ${MIN_TOKEN_LENGTH} characters`)
    .optional();
const httpUrl = () => text().refine(isHttpUrl, HTTP_URL_REASON).meta({ format: 'uri' });
const optionalHttpUrl = () =>
  text()
    .refine((v) => v === '' || isHttpUrl(v), HTTP_URL_REASON)
    .meta({ format: 'uri' })
    .optional();
const hostEntry = () =>
  text()
    .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(:\d{1,5})?$/, 'must be a host name, optionally with :port (no scheme or path)')
    .refine((v) => Number(/\]?:(\d+)$/.exec(v)?.[1] ?? 0) <= 65535, 'has a port above 65535')
    .meta({ title: 'host[:port]' });
const pct = () => z.number().min(0).max(100);
const port = (min: number) => z.number().int().min(min).max(65535);

export const WorkloadClassSchema = z.enum(WORKLOAD_CLASSES);

const thresholdFields = {
  idle_sustain_sec: z.number().min(30),
  cpu_idle_threshold_pct: pct(),
  gpu_idle_avg_threshold_pct: pct(),
  gpu_idle_peak_threshold_pct: pct(),
  vram_delta_threshold_mib: z.number().min(0),
} satisfies Record<keyof GateThresholdProfile, z.ZodNumber>;

/** Seconds without progress after which a running agent counts as stalled. */
const stallAfterSec = () => z.number().int().min(1).max(86_400);

/** Limits of each run's own cgroup (docs/worker-gate.md#worker-gate); null: the default share of memory, no pids or CPU limit. */
const runLimitFields = {
  run_memory_max_mib: z.number().int().min(16).nullable(),
  run_pids_max: z.number().int().min(8).max(4_194_304).nullable(),
  run_cpu_max_cores: z.number().min(0.01).max(4096).nullable(),
};

const ProfileOverrideSchema = z.strictObject({
  idle_sustain_sec: thresholdFields.idle_sustain_sec.optional(),
  cpu_idle_threshold_pct: thresholdFields.cpu_idle_threshold_pct.optional(),
  gpu_idle_avg_threshold_pct: thresholdFields.gpu_idle_avg_threshold_pct.optional(),
  gpu_idle_peak_threshold_pct: thresholdFields.gpu_idle_peak_threshold_pct.optional(),
  vram_delta_threshold_mib: thresholdFields.vram_delta_threshold_mib.optional(),
  stall_after_sec: stallAfterSec().optional(),
  run_memory_max_mib: runLimitFields.run_memory_max_mib.optional(),
  run_pids_max: runLimitFields.run_pids_max.optional(),
  run_cpu_max_cores: runLimitFields.run_cpu_max_cores.optional(),
});

const WorkerTargetSchema = z.strictObject({
  wake_gate_url: httpUrl(),
  bearer_token: token().meta({ secret: true }),
  role: z.enum(WORKER_TARGET_ROLES),
  min_memory_available_mib: z.number().int().min(0).optional(),
});

const WorkerTargetNameSchema = z
  .string()
  .regex(
    WORKER_TARGET_NAME_PATTERN,
    'is not a valid worker target name (letters, digits, "_", "." and "-", starting with a letter or digit)',
  );

const DEFAULT_COMMAND_MARKERS = ['codex', 'claude', 'python', 'torchrun', 'accelerate', 'vllm'];

/** The fields of the config file, in documentation order. Cross-field rules live in ConfigFileSchema. */
export const ConfigFieldsSchema = z.strictObject({
  control_api_bearer_token: doc(token(), {
    description: 'Bearer token for control API calls and incoming worker event posts.',
    secret: true,
  }),
  completion_callback_url: doc(httpUrl(), {
    perReplica: true,
    description:
      'URL that completion callbacks are posted to. Where roles holds both control_plane and worker_gate and it is left out, it is this process\'s own: http://<listen_host>:<listen_port>/control/api/worker-callback (loopback for a wildcard listen_host).',
  }),
  completion_callback_token: doc(token(), {
    description: 'Bearer token sent with completion callbacks.',
    secret: true,
  }),
  state_dir: doc(nonEmptyText(), {
    perReplica: true,
    description: 'Directory for service state (embedded database, Temporal dev server, gate records). Relative paths resolve against the config file directory.',
  }),
  project_root: doc(nonEmptyText(), {
    perReplica: true,
    description: 'Directory under which project workspaces live. Relative paths resolve against the config file directory.',
  }),
  dispatch_script_path: doc(nonEmptyText().optional(), {
    perReplica: true,
    description:
      "Script the worker gate runs (without a shell) to start an agent when its agent_runtime is 'script'; required then. Relative paths resolve against the config file directory.",
  }),
  roles: doc(
    z
      .array(z.enum(ROLES))
      .min(1)
      .refine((roles) => new Set(roles).size === roles.length, 'must not list a role twice')
      .meta({ uniqueItems: true })
      .default(['control_plane']),
    {
      perReplica: true,
      description:
        'Roles served by this process: control_plane (HTTP API, dashboard and Temporal workers) and worker_gate may share one port; temporal_worker alone runs the Temporal workers without an HTTP server, beside control planes on the same Postgres and Temporal.',
    },
  ),
  listen_host: doc(nonEmptyText().default('0.0.0.0'), { perReplica: true, description: 'Address to listen on.' }),
  listen_port: doc(port(0).default(8787), { perReplica: true, description: 'Port to listen on; 0 picks a free port.' }),
  allowed_hosts: doc(z.array(hostEntry()).default([]), {
    perReplica: true,
    description:
      'Host names this server answers to, each alone (any port) or as name:port; a request whose Host header names another gets 421 before authentication (IP addresses always pass). Guards a loopback dashboard against DNS rebinding. Empty: no check.',
  }),
  http_request_timeout_sec: doc(z.number().min(1).max(3600).default(30), {
    perReplica: true,
    description: 'Longest time a client may take to send a whole request (headers and body); a slower one is answered 408 and its connection closed.',
  }),
  http_max_connections: doc(z.number().int().min(1).default(256), {
    perReplica: true,
    description: 'Most client connections open at once; a connection beyond it is closed as soon as it is accepted.',
  }),
  http_max_connections_per_address: doc(z.number().int().min(1).default(128), {
    perReplica: true,
    description:
      'Most connections one client address (IPv6: one /64) may hold open at once, capped at http_max_connections; a connection beyond it is closed as soon as it is accepted. Every local process connects from the same loopback address and shares this limit.',
  }),
  dispatch_timeout_sec: doc(z.number().positive().default(30), {
    description: 'How long the dispatch script may run before the dispatch fails (504).',
  }),
  log_events: doc(z.boolean().default(true), {
    description:
      'Worker gate: write its event history to worker-gate/events.jsonl under state_dir (read back on restart); false keeps only the running process\'s recent events in memory, still shown by /dashboard/api. The control plane\'s audit trail is always written.',
  }),
  live_dispatch_enabled: doc(z.boolean().default(false), {
    description: 'Allow live (non-dry-run) dispatch; when false live dispatch answers 501.',
  }),
  worker_wake_gate_url: doc(optionalHttpUrl(), {
    description:
      'Base URL of the default worker gate. Where roles holds both control_plane and worker_gate and it is left out, it is this process\'s own gate: http://<listen_host>:<listen_port>.',
  }),
  worker_wake_gate_bearer_token: doc(optionalToken(), {
    description: 'Bearer token for the default worker gate; with the worker_gate role, also the token of this process\'s own gate routes (required then).',
    secret: true,
  }),
  sample_interval_sec: doc(z.number().min(1).default(5), { description: 'Telemetry sampling interval.' }),
  quiet_window_scope: doc(z.enum(['run', 'machine']).default('run'), {
    description:
      "What the worker gate's quiet window judges: 'run' (each run's own CPU and GPU use, so other work on the machine neither delays nor blocks its finish, and several runs can share a machine) or 'machine' (the whole machine's CPU and GPU, for hosts where a run's use cannot be told apart). The thresholds below mean different figures in each scope.",
  }),
  idle_sustain_sec: doc(thresholdFields.idle_sustain_sec.default(180), {
    description: 'How long a workload must stay below the idle thresholds to count as idle.',
  }),
  cpu_idle_threshold_pct: doc(thresholdFields.cpu_idle_threshold_pct.default(35), {
    description:
      "CPU use (percent) at or below which the workload counts as idle: with quiet_window_scope 'run', the run's own CPU (its cgroup's, or its tracked processes') as a percentage of one core; with 'machine', the whole machine's busy share of all its cores.",
  }),
  gpu_idle_avg_threshold_pct: doc(thresholdFields.gpu_idle_avg_threshold_pct.default(10), {
    description:
      "Average GPU use (percent) at or below which the workload counts as idle: with scope 'run', the utilisation of the GPUs the run's own compute processes are on (0 while it has none); with 'machine', the busiest GPU's.",
  }),
  gpu_idle_peak_threshold_pct: doc(thresholdFields.gpu_idle_peak_threshold_pct.default(20), {
    description: "Peak GPU use (percent) at or below which the workload counts as idle; the GPUs judged as for gpu_idle_avg_threshold_pct.",
  }),
  vram_delta_threshold_mib: doc(thresholdFields.vram_delta_threshold_mib.default(1024), {
    description:
      "Largest VRAM (MiB) still counted as idle; 0 requires none: with scope 'run', the GPU memory the run's own compute processes hold; with 'machine', the growth of all GPUs' memory over what was used when the run was dispatched.",
  }),
  max_wait_after_idle_sec: doc(z.number().min(60).default(43200), {
    description: 'Longest wait for a quiet window after idle was first seen.',
  }),
  stall_after_sec: doc(stallAfterSec().default(600), {
    description:
      "Worker gate: a running agent that shows no progress for this long (no lifecycle event, no sample of its own CPU or GPU above the quiet window's thresholds, and for Codex and Claude Code no model answer, tool event or usage change in the tool's stream) is stopped, its processes with it, and its run ends in gate_error with a reason starting 'stalled:'. workload_profiles may set it per class.",
  }),
  agent_model: doc(text().regex(AGENT_NAME_PATTERN, AGENT_NAME_RULE).default(''), {
    description: "Model the agent is started with (MODEL in the dispatch script's environment); '' leaves the agent's own default. dispatch-next may override it.",
  }),
  agent_reasoning_effort: doc(z.enum(REASONING_EFFORTS).default('medium'), {
    description: 'Reasoning effort the agent is started with (REASONING_EFFORT); dispatch-next may override it.',
  }),
  agent_sandbox: doc(text().regex(AGENT_NAME_PATTERN, AGENT_NAME_RULE).default(''), {
    description: "Sandbox the agent is started in (SANDBOX); '' leaves the agent's own default. dispatch-next may override it.",
  }),
  agent_token_budget_multiple: doc(z.number().min(0).max(1000).default(2), {
    description:
      "A run's token budget: its research candidate's expected_token_budget times this. Past it, the worker gate's launcher stops a real agent (SIGINT, then SIGTERM and SIGKILL) and the run ends in gate_error; 0 sets no budget. A run without a candidate, or whose candidate names no budget, has none.",
  }),
  agent_runtime: doc(z.enum(AGENT_RUNTIMES).default('script'), {
    description:
      "Worker gate: the agent it starts. 'script' runs dispatch_script_path; 'codex' runs Codex CLI and 'claude-code' Claude Code, each under the gate's own launcher with its lifecycle hooks (docs/worker-gate.md#running-real-agents).",
  }),
  agent_runtime_by_workload_class: doc(z.partialRecord(WorkloadClassSchema, z.enum(AGENT_RUNTIMES)).default({}), {
    description: 'Worker gate: workload class → agent runtime, over agent_runtime for runs of that class.',
  }),
  agent_credential_env: doc(z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name')).default(['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL']), {
    description:
      "Worker gate: the names of its environment variables that a real agent receives (model keys and server URLs); the values are read from the gate's environment, never from this file. Nothing else of the gate's environment reaches the agent but what a process needs (PATH, HOME, locale).",
  }),
  agent_user: doc(nonEmptyText().regex(/^[a-z_][a-z0-9_-]{0,31}$/, 'must be a user name').default('rcp-agent'), {
    perReplica: true,
    description:
      "Worker gate: the unprivileged user agents run as, when the gate can switch users (root, or CAP_SETUID and CAP_SETGID); it owns the run's project directory and its home. scripts/ensure-agent-user.sh creates it. Without it, or without the capability, agents run as the gate's own user (docs/security.md#security-model).",
  }),
  agent_isolation: doc(z.enum(['auto', 'off']).default('auto'), {
    description:
      "Worker gate: 'auto' starts every agent (the dispatch script, Codex, Claude Code) in a bwrap sandbox that shows only its project, its home, its tools and the read-only system, and as agent_user where the gate can switch users; 'off' starts agents unsandboxed (reported at start, in /control/health and /dashboard/api, and failing a strict preflight).",
  }),
  agent_read_only_paths: doc(z.array(nonEmptyText()).default([]), {
    perReplica: true,
    description: 'Worker gate: more directories an agent sees read-only in its sandbox (data sets, model caches). Relative paths resolve against the config file directory.',
  }),
  agent_writable_paths: doc(z.array(nonEmptyText()).default([]), {
    perReplica: true,
    description: 'Worker gate: directories an agent may also write in its sandbox, shared by every run (a scratch or cache directory). Relative paths resolve against the config file directory.',
  }),
  agent_tmux_enabled: doc(z.boolean().default(false), {
    description:
      "Worker gate: start a real agent's runner inside a tmux session named after the run, on a tmux server of its own (watch it with tmux -L <session> attach -t <session>); the run reports the session as tmux_session. Needs tmux on the worker.",
  }),
  codex_path: doc(text().default(''), {
    perReplica: true,
    description: "Worker gate: the codex executable; '' runs the pinned version that scripts/ensure-agents.sh installs in the user cache (as root, /var/cache, which the agent user can reach). The agent user must be able to reach it.",
  }),
  claude_code_path: doc(text().default(''), {
    perReplica: true,
    description: "Worker gate: the claude executable (Claude Code); '' runs the pinned version that scripts/ensure-agents.sh installs in the user cache (as root, /var/cache, which the agent user can reach). The agent user must be able to reach it.",
  }),
  default_workload_class: doc(WorkloadClassSchema.default('inference_eval'), {
    description: 'Workload class used when an item names none.',
  }),
  workload_profiles: doc(z.partialRecord(WorkloadClassSchema, ProfileOverrideSchema).default({}), {
    description: 'Per-class threshold overrides; they win over the built-in profiles (inference_eval, training, cpu_only, gpu_required) and the global thresholds.',
  }),
  run_cgroup_mode: doc(z.enum(['auto', 'v2', 'v1', 'none']).default('auto'), {
    description:
      "Worker gate: how each run is contained in a cgroup of its own. 'auto' takes cgroup v2 where the gate has a delegated subtree (run_cgroup_v2_root, or its own cgroup under systemd Delegate=yes) offering the memory and pids controllers, else the v1 hierarchies (pids, memory, freezer, cpu, cpuacct) where they are writable, else v2 without limits, else none; 'v2' and 'v1' insist (the gate does not start without it); 'none' tracks runs by their process tree. /dashboard/api shows the mode and why as service.run_cgroups.",
  }),
  run_cgroup_v2_root: doc(text().default(''), {
    perReplica: true,
    description:
      "Worker gate: a cgroup v2 directory the gate may create its run cgroups under (for example /sys/fs/cgroup/unified or a subtree delegated to the gate's user); '' uses the gate's own cgroup when it is delegated (not the hierarchy's root, and writable), moving the gate into <own>/gate first.",
  }),
  run_cgroup_parent: doc(text().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'must be one directory name').or(z.literal('')).default(''), {
    perReplica: true,
    description:
      "Worker gate: the directory (in each hierarchy) that holds this gate's run cgroups, one run-<run_id> each; '' derives rcp-gate-<hash of state_dir>, so two gates on one machine never sweep each other's runs.",
  }),
  run_memory_max_mib: doc(runLimitFields.run_memory_max_mib.default(null), {
    description:
      "Worker gate: memory limit of each run's cgroup (v2 memory.max, v1 memory.limit_in_bytes); the run's processes past it are killed by the kernel, never the gate. null: 75 % of the machine's memory. workload_profiles may set it per class.",
  }),
  run_pids_max: doc(runLimitFields.run_pids_max.default(4096), {
    description: "Worker gate: most processes and threads at once in a run's cgroup (pids.max): a fork bomb stops there. null: no limit. workload_profiles may set it per class.",
  }),
  run_cpu_max_cores: doc(runLimitFields.run_cpu_max_cores.default(null), {
    description: "Worker gate: CPU time a run's cgroup may use, in cores (v2 cpu.max, v1 cpu.cfs_quota_us); null: unlimited. workload_profiles may set it per class.",
  }),
  stale_project_process_reaper_enabled: doc(z.boolean().default(true), {
    description: 'Terminate leftover agent processes of finished projects.',
  }),
  stale_project_process_grace_sec: doc(z.number().min(0).default(900), {
    description: 'Age after which a leftover project process counts as stale.',
  }),
  stale_project_process_term_grace_sec: doc(z.number().min(0).default(5), {
    description: 'Wait between SIGTERM and SIGKILL when reaping.',
  }),
  stale_project_process_command_markers: doc(z.array(text()).default(DEFAULT_COMMAND_MARKERS), {
    description: 'Command-name markers that identify agent processes the reaper may end.',
  }),
  completion_callback_timeout_sec: doc(z.number().positive().default(120), {
    description: 'Timeout of one completion callback attempt.',
  }),
  completion_callback_fallback_urls: doc(z.array(httpUrl()).max(16).default([]), {
    perReplica: true,
    description:
      'Worker gate: the callback URLs of the other control-plane replicas. A callback that completion_callback_url does not take (no answer, or not a 2xx) goes to the next of these at once; the next callback starts with the URL that took the last one.',
  }),
  worker_targets: doc(z.record(WorkerTargetNameSchema, WorkerTargetSchema).default({}), {
    description: 'Named worker machines the control plane may dispatch to.',
  }),
  workload_machine_targets: doc(z.partialRecord(WorkloadClassSchema, text().meta({ title: 'worker target name' })).default({}), {
    description: 'Workload class → worker target name; every name must be defined in worker_targets.',
  }),
  push_alerts_enabled: doc(z.boolean().default(false), {
    description: 'Send queue alerts to a Pushover-style push service; requires push_app_token, push_user_key and push_api_url.',
  }),
  push_app_token: doc(text().optional(), { description: 'Push service application token (sent as the form field `token`).', secret: true }),
  push_user_key: doc(text().optional(), { description: 'Push service user key (sent as the form field `user`).', secret: true }),
  push_api_url: doc(optionalHttpUrl(), { description: 'Push service API URL, e.g. its messages endpoint.' }),
  queue_alert_cooldown_sec: doc(z.number().min(0).default(1800), {
    description: 'A finding is sent at most once per this many seconds (force_notify on a check sends it anyway).',
  }),
  queue_alert_hang_after_sec: doc(z.number().min(0).default(3600), {
    description: 'A run waiting on its agent with no callback for this long is reported as hung.',
  }),
  queue_alert_check_interval_sec: doc(z.number().int().min(1).max(86400).default(300), {
    description: 'Seconds between scheduled queue checks (the schedule is paused while no alert channel is enabled).',
  }),
  chat_alert_webhook_enabled: doc(z.boolean().default(false), {
    description: 'Post queue alerts to a chat webhook; requires chat_alert_webhook_url.',
  }),
  chat_alert_webhook_url: doc(optionalHttpUrl(), {
    description: 'Chat webhook URL (secret: chat services carry their token in the path).',
    secret: true,
  }),
  chat_alert_webhook_secret: doc(text().optional(), {
    description: 'Signs each webhook post: header X-Signature-256 is sha256=<hex HMAC-SHA256 of the raw body>; unset sends no signature.',
    secret: true,
  }),
  chat_alert_webhook_timeout_sec: doc(z.number().positive().default(10), {
    description: 'Time limit of one alert post (webhook and push).',
  }),
  queue_pump_enabled: doc(z.boolean().default(false), {
    description: 'Advance the queue on a Temporal Schedule: each tick dispatches the next eligible item live when that is safe (the schedule exists either way, paused while this is false).',
  }),
  queue_pump_interval_sec: doc(z.number().int().min(1).max(86400).default(60), { description: 'Seconds between queue pump ticks.' }),
  queue_pump_followup_launch_enabled: doc(z.boolean().default(false), {
    description: 'Let each queue pump tick launch the next follow-up of a negative or inconclusive run.',
  }),
  queue_pump_paper_draft_enabled: doc(z.boolean().default(false), {
    description: 'Let each queue pump tick draft the next paper (draft-next).',
  }),
  paper_writer_provider: doc(z.enum(PAPER_WRITER_PROVIDERS).default('deterministic'), {
    description: 'Paper writer; openai_compatible requires paper_writer_base_url and paper_writer_model.',
  }),
  paper_writer_base_url: doc(optionalHttpUrl(), { description: 'Base URL of the hosted paper writer.' }),
  paper_writer_model: doc(text().optional(), { description: 'Model name for the hosted paper writer.' }),
  paper_writer_api_key: doc(text().default(''), {
    description: 'API key for the hosted paper writer; prefer the environment variable.',
    secret: true,
    env: 'PAPER_WRITER_API_KEY',
  }),
  paper_writer_timeout_sec: doc(z.number().positive().default(180), {
    description: 'Timeout of one paper writer request.',
  }),
  paper_writer_temperature: doc(z.number().min(0).max(2).default(0.2), { description: 'Sampling temperature.' }),
  paper_writer_max_tokens: doc(z.number().int().min(1).default(12000), {
    description: 'Maximum tokens per paper writer response.',
  }),
  paper_writer_fallback_enabled: doc(z.boolean().default(true), {
    description: 'Fall back to the deterministic writer when the hosted one fails.',
  }),
  paper_activity_slots: doc(z.number().int().min(1).max(64).default(4), {
    perReplica: true,
    description: 'Paper file steps (evidence sync, the writer, the checklist) this control plane runs at once, on their own task queue <temporal_task_queue>-papers: slow writers never hold the slots of the runs\' gate calls.',
  }),
  paper_evidence_sync_enabled: doc(z.boolean().default(false), {
    description: 'Copy paper evidence from the worker over SSH; requires the host and remote root.',
  }),
  paper_evidence_sync_ssh_host: doc(text().optional(), { description: 'SSH host to copy evidence from.' }),
  paper_evidence_sync_remote_root: doc(text().optional(), {
    description: 'Project root on the remote host.',
  }),
  paper_evidence_sync_timeout_sec: doc(z.number().positive().default(120), {
    description: 'Timeout of one evidence sync.',
  }),
  route_observability_enabled: doc(z.boolean().default(false), {
    perReplica: true,
    description: 'Write one JSON line per request (route template, status, duration, RSS) to the route log, rotated at 10 MiB.',
  }),
  route_observability_log_path: doc(text().default(''), {
    perReplica: true,
    description: 'The route log; empty: route-observability.jsonl under state_dir. Relative paths resolve against the config file directory.',
  }),
  route_observability_slow_ms: doc(z.number().min(0).default(1000), {
    perReplica: true,
    description: 'With route observability on, a request slower than this logs a warning and is marked slow in the route log.',
  }),
  route_observability_memory_warn_rss_mib: doc(z.number().min(0).default(0), {
    perReplica: true,
    description: 'Resident memory above this is reported by /control/api/v1/observability/memory and, with route observability on, warned about per request; 0 disables.',
  }),
  operational_trace_enabled: doc(z.boolean().default(false), {
    perReplica: true,
    description:
      'Write the request and response payloads of command routes (every method but GET, on this process\'s control plane and worker gate) and of calls to worker gates to the trace file, one JSON line per exchange, secrets redacted (docs/operations.md#operational-trace). It captures raw payloads: keep disabled unless intended.',
  }),
  operational_trace_log_path: doc(text().default(''), {
    perReplica: true,
    description: 'Trace file (created mode 0600); empty: operational-trace.jsonl under state_dir. Relative paths resolve against the config file directory.',
  }),
  operational_trace_max_payload_bytes: doc(z.number().int().min(1024).default(16384), {
    perReplica: true,
    description: 'Each payload is cut to this many bytes of its serialized text; a cut one is marked "truncated": true with its whole size.',
  }),
  operational_trace_redact_prompt_text: doc(z.boolean().default(true), {
    perReplica: true,
    description: 'Replace every prompt_text value in the trace (the agent\'s prompt); false keeps prompts readable there.',
  }),
  control_plane_store_backend: doc(z.enum(['embedded', 'pg', 'pg_readonly', 'sqlite']).default('embedded'), {
    description: 'embedded: in-process Postgres files under state_dir (sqlite is an alias); pg: Postgres at pg_database_url; pg_readonly: reads only, writes answer 501.',
  }),
  core_store_backend: doc(z.enum(['control_plane']).default('control_plane'), {
    description: 'Store of the /svc-core sub-service: control_plane, the only value, keeps Core snapshots in the control plane\'s own database.',
  }),
  core_mode: doc(z.enum(['off', 'shadow', 'compare', 'enforce']).default('shadow'), {
    description: 'Mode of a Core snapshot that names none, and the mode /svc-core/health reports: off records nothing, shadow records, compare also warns where the snapshot disagrees with the live queue, enforce also applies its queue rows.',
  }),
  core_enforce_enabled: doc(z.boolean().default(false), {
    description: 'Allow Core snapshots in enforce mode, which write queue rows (never one in flight); without it an enforce snapshot answers 403.',
  }),
  pg_database_url: doc(
    text()
      .refine((v) => v === '' || isPostgresUrl(v), 'must be a postgres:// or postgresql:// URL')
      .meta({ title: 'postgres:// URL' })
      .default(''),
    { perReplica: true, description: 'Postgres URL; required for pg and pg_readonly.', secret: true },
  ),
  legacy_notes_api_enabled: doc(z.boolean().default(false), {
    description: 'Serve GET /control/api/intake/legacy-notes: the latest Core snapshot from source legacy_notes, its queued projects and skipped rows; 404 when false.',
  }),
  session_cookie_secure: doc(z.boolean().default(false), {
    description: 'Mark the dashboard session cookie Secure (set when served over HTTPS).',
  }),
  temporal_address: doc(text().default(''), {
    perReplica: true,
    description: 'Temporal frontend host:port; empty starts an embedded dev server under state_dir.',
    env: 'TEMPORAL_ADDRESS',
  }),
  temporal_namespace: doc(nonEmptyText().default('default'), { description: 'Temporal namespace.' }),
  temporal_task_queue: doc(nonEmptyText().default('control-plane'), { description: 'Temporal task queue.' }),
  temporal_ui_enabled: doc(z.boolean().default(true), {
    perReplica: true,
    description: 'Serve the embedded Temporal dev server\'s web UI (on loopback, without authentication); false starts the dev server without it.',
  }),
  temporal_ui_port: doc(port(1).default(8233), { perReplica: true, description: 'Port of the embedded Temporal dev server UI.' }),
  temporal_dev_server_port: doc(port(1).optional(), {
    perReplica: true,
    description: 'Frontend (gRPC) port of the embedded Temporal dev server; unset: 7233 when free, else a free port. Set it when two installs share a machine.',
  }),
  temporal_tls: doc(z.boolean().default(false), {
    perReplica: true,
    description: 'Connect to temporal_address over TLS, trusting the system CAs unless temporal_tls_server_ca_cert_path names one. Implied by the other temporal_tls_* fields and by temporal_api_key. TEMPORAL_TLS overrides it.',
  }),
  temporal_tls_server_ca_cert_path: doc(text().default(''), {
    perReplica: true,
    description: 'PEM file of the CA that signed the Temporal frontend\'s certificate. TEMPORAL_TLS_SERVER_CA_CERT_PATH overrides it.',
  }),
  temporal_tls_client_cert_path: doc(text().default(''), {
    perReplica: true,
    description: 'PEM file of this control plane\'s client certificate, for a Temporal that requires mTLS; with temporal_tls_client_key_path. TEMPORAL_TLS_CLIENT_CERT_PATH overrides it.',
  }),
  temporal_tls_client_key_path: doc(text().default(''), {
    perReplica: true,
    description: 'PEM file of the client certificate\'s private key. TEMPORAL_TLS_CLIENT_KEY_PATH overrides it.',
  }),
  temporal_tls_server_name: doc(text().default(''), {
    perReplica: true,
    description: 'Server name the Temporal frontend\'s certificate is checked against, when it is not the host of temporal_address. TEMPORAL_TLS_SERVER_NAME overrides it.',
  }),
  temporal_api_key: doc(text().default(''), {
    description: 'API key sent to Temporal (Temporal Cloud, or a server with an authorizer); turns TLS on. TEMPORAL_API_KEY overrides it.',
    secret: true,
  }),
  otel_exporter_otlp_endpoint: doc(text().refine((v) => v === '' || isHttpUrl(v), HTTP_URL_REASON).default(''), {
    perReplica: true,
    description: 'OTLP/HTTP endpoint (a collector, e.g. http://127.0.0.1:4318) that traces of workflows and activities are sent to, at <endpoint>/v1/traces; empty: no tracing.',
    env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
  }),
  research_provider_base_url: doc(optionalHttpUrl(), {
    description: 'Base URL of the OpenAI-compatible research provider; generation posts to `${base_url}/chat/completions`.',
  }),
  research_provider_model: doc(text().optional(), { description: 'Model the research provider is asked for candidates.' }),
  research_provider_quota_url: doc(optionalHttpUrl(), {
    description: 'Quota endpoint read before every provider request; generation is refused while it cannot be read.',
  }),
  research_provider_min_remaining_credits: doc(z.number().min(0).default(5), {
    description: 'Do not call the provider when fewer credits remain.',
  }),
  research_provider_request_reserve: doc(z.number().min(0).default(10), {
    description: "Requests of the provider's rolling window that generation never spends.",
  }),
  research_provider_timeout_sec: doc(z.number().positive().default(60), {
    description: 'Time limit of one quota read or generation request.',
  }),
});

type ConfigFields = z.output<typeof ConfigFieldsSchema>;
type ProblemSink = (path: (string | number)[], message: string) => void;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// A wrongly typed value counts as set: its type problem is reported on its own.
function isSet(value: unknown): boolean {
  return value !== undefined && value !== null && !(typeof value === 'string' && value.trim() === '');
}

function requireWhen(raw: Record<string, unknown>, fields: string[], condition: string, report: ProblemSink): void {
  for (const field of fields) {
    if (!isSet(raw[field])) report([field], `is required when ${condition}`);
  }
}

// Reads the raw input (an absent field means its default) so that it can run even when
// single fields failed, and every problem is reported at once.
function checkCrossFieldRules(raw: Record<string, unknown>, report: ProblemSink): void {
  const backend = raw.control_plane_store_backend;
  if (backend === 'pg' || backend === 'pg_readonly') {
    requireWhen(raw, ['pg_database_url'], `control_plane_store_backend is "${backend}"`, report);
  }
  if (Array.isArray(raw.roles) && raw.roles.includes('temporal_worker')) {
    if (raw.roles.length > 1) report(['roles'], 'must list temporal_worker alone (a control_plane runs Temporal workers already)');
    if (raw.control_plane_store_backend !== 'pg') report(['control_plane_store_backend'], 'must be "pg" when roles is temporal_worker (it shares the control planes\' database)');
    requireWhen(raw, ['temporal_address'], 'roles is temporal_worker (it joins the control planes\' Temporal)', report);
  }
  if (Array.isArray(raw.roles) && raw.roles.includes('worker_gate')) {
    requireWhen(raw, ['worker_wake_gate_bearer_token'], 'roles includes "worker_gate" (it guards the gate\'s own routes)', report);
    if (runsScripts(raw)) requireWhen(raw, ['dispatch_script_path'], 'the worker gate starts agents with agent_runtime "script"', report);
  }
  if (raw.push_alerts_enabled === true) {
    requireWhen(raw, ['push_app_token', 'push_user_key', 'push_api_url'], 'push_alerts_enabled is true', report);
  }
  if (raw.chat_alert_webhook_enabled === true) {
    requireWhen(raw, ['chat_alert_webhook_url'], 'chat_alert_webhook_enabled is true', report);
  }
  if (raw.paper_evidence_sync_enabled === true) {
    requireWhen(
      raw,
      ['paper_evidence_sync_ssh_host', 'paper_evidence_sync_remote_root'],
      'paper_evidence_sync_enabled is true',
      report,
    );
  }
  if (isSet(raw.temporal_tls_client_cert_path)) {
    requireWhen(raw, ['temporal_tls_client_key_path'], 'temporal_tls_client_cert_path is set (a client certificate needs its key)', report);
  }
  if (isSet(raw.temporal_tls_client_key_path)) requireWhen(raw, ['temporal_tls_client_cert_path'], 'temporal_tls_client_key_path is set', report);
  if (raw.paper_writer_provider === 'openai_compatible') {
    requireWhen(raw, ['paper_writer_base_url', 'paper_writer_model'], 'paper_writer_provider is "openai_compatible"', report);
  }
  const machineTargets = raw.workload_machine_targets;
  const targets = isRecord(raw.worker_targets) ? raw.worker_targets : {};
  if (isRecord(machineTargets)) {
    for (const [cls, name] of Object.entries(machineTargets)) {
      if (typeof name === 'string' && !Object.hasOwn(targets, name)) {
        report(['workload_machine_targets', cls], `names worker target "${name}", which is not defined in worker_targets`);
      }
    }
  }
}

/** Whether a worker gate with this raw config runs dispatch_script_path for some workload class. */
function runsScripts(raw: Record<string, unknown>): boolean {
  const byClass = isRecord(raw.agent_runtime_by_workload_class) ? raw.agent_runtime_by_workload_class : {};
  const fallback = raw.agent_runtime ?? 'script';
  return WORKLOAD_CLASSES.some((cls) => (byClass[cls] ?? fallback) === 'script');
}

const OPTIONAL_FIELDS = Object.entries(ConfigFieldsSchema.shape)
  .filter(([, schema]) => schema.type === 'optional')
  .map(([name]) => name);

function normalize(fields: ConfigFields) {
  const backend = fields.control_plane_store_backend;
  const out = { ...fields, control_plane_store_backend: backend === 'sqlite' ? 'embedded' : backend };
  // An empty string in an optional field means "not set".
  const loose = out as Record<string, unknown>;
  for (const name of OPTIONAL_FIELDS) {
    if (loose[name] === '') delete loose[name];
  }
  return out;
}

/**
 * The whole config file: field rules, cross-field rules, then normalization.
 * Built as a transform rather than a refinement of ConfigFieldsSchema because zod skips
 * refinements after some field issues (e.g. a non-integer), and every problem must be listed.
 */
export const ConfigFileSchema = z.unknown().transform((raw, ctx) => {
  const fields = ConfigFieldsSchema.safeParse(raw);
  if (!fields.success) {
    for (const issue of fields.error.issues) ctx.addIssue({ ...issue, input: undefined } as z.core.$ZodRawIssue);
  }
  if (isRecord(raw)) {
    checkCrossFieldRules(raw, (path, message) => ctx.addIssue({ code: 'custom', path, message, input: undefined }));
  }
  return fields.success ? normalize(fields.data) : z.NEVER;
});

/** Fields that only the environment supplies (see ENV_ONLY_FIELDS). */
export type EnvOnlyConfig = { research_provider_api_key: string | undefined };

/** The normalized config: defaults applied, aliases mapped, relative paths made absolute. */
export type Config = z.output<typeof ConfigFileSchema> & EnvOnlyConfig;
export type WorkerTarget = z.output<typeof WorkerTargetSchema>;

function fieldMeta(schema: z.ZodType): FieldMeta | undefined {
  return z.globalRegistry.get(schema) as FieldMeta | undefined;
}

/** Top-level fields whose values must never be logged. Nested: worker_targets.*.bearer_token. */
export const SECRET_FIELDS: readonly (keyof Config)[] = [
  ...Object.entries(ConfigFieldsSchema.shape)
    .filter(([, schema]) => fieldMeta(schema)?.secret === true)
    .map(([name]) => name as keyof Config),
  ...Object.values(ENV_ONLY_FIELDS),
];

/** Top-level fields each control-plane replica may set its own way; the rest make up the cluster's config. */
export const PER_REPLICA_FIELDS: readonly (keyof Config)[] = Object.entries(ConfigFieldsSchema.shape)
  .filter(([, schema]) => fieldMeta(schema)?.perReplica === true)
  .map(([name]) => name as keyof Config);

const REDACTED = '[redacted]';

/** A copy of the config that is safe to log: set secrets are replaced by "[redacted]". */
export function redactConfig(config: Config): Record<string, unknown> {
  const out: Record<string, unknown> = { ...config };
  for (const field of SECRET_FIELDS) {
    if (isSet(out[field])) out[field] = REDACTED;
  }
  out.worker_targets = Object.fromEntries(
    Object.entries(config.worker_targets).map(([name, target]) => [name, { ...target, bearer_token: REDACTED }]),
  );
  return out;
}

// ---------------------------------------------------------------------------
// Field documentation, derived from the schema's JSON Schema form and metadata.

export type ConfigFieldDoc = {
  name: string;
  type: string;
  /** JSON text of the default, or "" when the field has none. */
  default: string;
  required: boolean;
  secret: boolean;
  /** May differ between control-plane replicas (left out of the config fingerprint). */
  perReplica: boolean;
  description: string;
  /** Environment variable that overrides the file value, if any. */
  env?: string;
};

type JsonNode = Record<string, unknown>;

function asNode(value: unknown): JsonNode | undefined {
  return isRecord(value) ? value : undefined;
}

function numberRange(node: JsonNode): string {
  const limit = Number.MAX_SAFE_INTEGER;
  const min = typeof node.minimum === 'number' && node.minimum > -limit ? node.minimum : undefined;
  const max = typeof node.maximum === 'number' && node.maximum < limit ? node.maximum : undefined;
  const exclusiveMin = typeof node.exclusiveMinimum === 'number' ? node.exclusiveMinimum : undefined;
  if (min !== undefined && max !== undefined) return ` ${min}–${max}`;
  if (exclusiveMin !== undefined) return ` > ${exclusiveMin}`;
  if (min !== undefined) return ` ≥ ${min}`;
  if (max !== undefined) return ` ≤ ${max}`;
  return '';
}

function describeKey(node: JsonNode | undefined): string {
  if (!node) return 'name';
  if (Array.isArray(node.enum)) {
    const same = node.enum.length === WORKLOAD_CLASSES.length && WORKLOAD_CLASSES.every((c) => (node.enum as unknown[]).includes(c));
    return same ? 'workload class' : node.enum.map((v) => JSON.stringify(v)).join(' | ');
  }
  return typeof node.pattern === 'string' ? `name (/${node.pattern}/)` : 'name';
}

function describeType(node: JsonNode | undefined): string {
  if (!node) return 'any';
  if (typeof node.title === 'string') return node.title;
  if (Array.isArray(node.enum)) return node.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (node.const !== undefined) return JSON.stringify(node.const);
  if (Array.isArray(node.anyOf)) return node.anyOf.map((n) => describeType(asNode(n))).join(' | ');
  const secret = node.secret === true ? 'secret ' : '';
  switch (node.type) {
    case 'string': {
      if (node.format === 'uri') return `${secret}URL`;
      const min = typeof node.minLength === 'number' ? node.minLength : 0;
      if (min > 1) return `${secret}string (min length ${min})`;
      return `${secret}${min === 1 ? 'non-empty string' : 'string'}`;
    }
    case 'integer':
    case 'number':
      return `${node.type}${numberRange(node)}`;
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array': {
      const notes = [node.minItems === 1 ? 'non-empty' : '', node.uniqueItems === true ? 'unique' : ''].filter(Boolean);
      return `array of ${describeType(asNode(node.items))}${notes.length ? ` (${notes.join(', ')})` : ''}`;
    }
    case 'object': {
      const properties = asNode(node.properties);
      if (properties) {
        const required = Array.isArray(node.required) ? node.required : [];
        const parts = Object.entries(properties).map(
          ([name, child]) => `${name}${required.includes(name) ? '' : '?'}: ${describeType(asNode(child))}`,
        );
        return `{ ${parts.join(', ')} }`;
      }
      return `map ${describeKey(asNode(node.propertyNames))} → ${describeType(asNode(node.additionalProperties))}`;
    }
    default:
      return 'any';
  }
}

/** One entry per config field, in schema order, for the configuration reference (docs/configuration.md). */
export function configFieldDocs(): ConfigFieldDoc[] {
  const json = z.toJSONSchema(ConfigFieldsSchema, { io: 'input', unrepresentable: 'any' }) as JsonNode;
  const properties = asNode(json.properties) ?? {};
  const required = new Set(Array.isArray(json.required) ? json.required : []);
  return Object.entries(ConfigFieldsSchema.shape).map(([name, schema]) => {
    const node = asNode(properties[name]) ?? {};
    const meta = fieldMeta(schema);
    const entry: ConfigFieldDoc = {
      name,
      // Secrecy of a top-level field goes in its own column, not in the type text.
      type: describeType({ ...node, secret: false }),
      default: 'default' in node ? JSON.stringify(node.default) : '',
      required: required.has(name),
      secret: meta?.secret === true,
      perReplica: meta?.perReplica === true,
      description: meta?.description ?? '',
    };
    if (meta?.env) entry.env = meta.env;
    return entry;
  });
}
