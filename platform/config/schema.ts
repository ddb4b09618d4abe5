import { z } from 'zod';
import { checkCrossFieldRules } from './cross-field-rules.ts';
import { fieldDocs, type ConfigFieldDoc } from './field-docs.ts';
import { automationFields } from './fields/automation-fields.ts';
import { coreFields } from './fields/core-fields.ts';
import { fieldMeta, isRecord, isSet } from './fields/field-kinds.ts';
import { observabilityFields } from './fields/observability-fields.ts';
import { papersFields } from './fields/papers-fields.ts';
import { researchFields } from './fields/research-fields.ts';
import { runsFields } from './fields/runs-fields.ts';
import { serverFields } from './fields/server-fields.ts';
import { storeFields } from './fields/store-fields.ts';
import { temporalFields } from './fields/temporal-fields.ts';
import { workerGateFields } from './fields/worker-gate-fields.ts';

/**
 * The config file's schema, composed from one fragment of fields per owner (fields/): the platform's own (the process
 * and its HTTP server, the store, Temporal, observability), the worker gate's, and each room's that has settings
 * (runs, papers, research, core, automation; the queue and console rooms have none). The fields keep one documentation
 * order across fragments (FIELD_ORDER), which test/fixtures/config-fields.json freezes.
 */

export { MIN_TOKEN_LENGTH, PLACEHOLDER_REASON, WorkloadClassSchema, isHttpUrl, isPlaceholder } from './fields/field-kinds.ts';
export { PAPER_WRITER_PROVIDERS } from './fields/papers-fields.ts';
export { WORKER_TARGET_NAME_PATTERN, WORKER_TARGET_ROLES, type WorkerTarget } from './fields/runs-fields.ts';
export { ROLES, type Role } from './fields/server-fields.ts';
export { STORE_BACKENDS } from './fields/store-fields.ts';
export type { ConfigFieldDoc } from './field-docs.ts';

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

const FRAGMENTS = [
  serverFields,
  storeFields,
  temporalFields,
  observabilityFields,
  runsFields,
  workerGateFields,
  automationFields,
  papersFields,
  coreFields,
  researchFields,
];

const ALL_FIELDS = {
  ...serverFields,
  ...storeFields,
  ...temporalFields,
  ...observabilityFields,
  ...runsFields,
  ...workerGateFields,
  ...automationFields,
  ...papersFields,
  ...coreFields,
  ...researchFields,
};

type FieldName = keyof typeof ALL_FIELDS;

/**
 * The order of the fields in the configuration reference and in every listing of them, kept from before the schema
 * was split: it mixes the fragments, so that fields read together (a callback's URL, token and timeout) stay together.
 */
const FIELD_ORDER: readonly FieldName[] = [
  'control_api_bearer_token',
  'completion_callback_url',
  'completion_callback_token',
  'state_dir',
  'project_root',
  'dispatch_script_path',
  'roles',
  'listen_host',
  'listen_port',
  'allowed_hosts',
  'http_request_timeout_sec',
  'http_max_connections',
  'http_max_connections_per_address',
  'dispatch_timeout_sec',
  'log_events',
  'live_dispatch_enabled',
  'worker_wake_gate_url',
  'worker_wake_gate_bearer_token',
  'sample_interval_sec',
  'quiet_window_scope',
  'idle_sustain_sec',
  'cpu_idle_threshold_pct',
  'gpu_idle_avg_threshold_pct',
  'gpu_idle_peak_threshold_pct',
  'vram_delta_threshold_mib',
  'max_wait_after_idle_sec',
  'stall_after_sec',
  'agent_model',
  'agent_reasoning_effort',
  'agent_sandbox',
  'agent_token_budget_multiple',
  'agent_question_wait_sec',
  'agent_runtime',
  'agent_runtime_by_workload_class',
  'agent_credential_env',
  'agent_user',
  'agent_isolation',
  'agent_read_only_paths',
  'agent_writable_paths',
  'agent_tmux_enabled',
  'codex_path',
  'claude_code_path',
  'default_workload_class',
  'workload_profiles',
  'run_cgroup_mode',
  'run_cgroup_v2_root',
  'run_cgroup_parent',
  'run_memory_max_mib',
  'run_pids_max',
  'run_cpu_max_cores',
  'run_slots',
  'run_gpus',
  'agent_continue_limit',
  'usage_limit_backoff_sec',
  'usage_limit_hold_sec',
  'stale_project_process_reaper_enabled',
  'stale_project_process_grace_sec',
  'stale_project_process_term_grace_sec',
  'stale_project_process_command_markers',
  'completion_callback_timeout_sec',
  'completion_callback_fallback_urls',
  'worker_targets',
  'workload_machine_targets',
  'workload_run_needs',
  'push_alerts_enabled',
  'push_app_token',
  'push_user_key',
  'push_api_url',
  'queue_alert_cooldown_sec',
  'queue_alert_hang_after_sec',
  'queue_alert_check_interval_sec',
  'chat_alert_webhook_enabled',
  'chat_alert_webhook_url',
  'chat_alert_webhook_secret',
  'chat_alert_webhook_timeout_sec',
  'queue_pump_enabled',
  'queue_pump_interval_sec',
  'queue_pump_followup_launch_enabled',
  'queue_pump_paper_draft_enabled',
  'paper_writer_provider',
  'paper_writer_base_url',
  'paper_writer_model',
  'paper_writer_api_key',
  'paper_writer_timeout_sec',
  'paper_writer_temperature',
  'paper_writer_max_tokens',
  'paper_writer_fallback_enabled',
  'paper_activity_slots',
  'paper_evidence_sync_enabled',
  'paper_evidence_sync_ssh_host',
  'paper_evidence_sync_remote_root',
  'paper_evidence_sync_timeout_sec',
  'route_observability_enabled',
  'route_observability_log_path',
  'route_observability_slow_ms',
  'route_observability_memory_warn_rss_mib',
  'operational_trace_enabled',
  'operational_trace_log_path',
  'operational_trace_max_payload_bytes',
  'operational_trace_redact_prompt_text',
  'control_plane_store_backend',
  'core_store_backend',
  'core_mode',
  'core_enforce_enabled',
  'pg_database_url',
  'legacy_notes_api_enabled',
  'session_cookie_secure',
  'temporal_address',
  'temporal_namespace',
  'temporal_task_queue',
  'temporal_ui_enabled',
  'temporal_ui_port',
  'temporal_dev_server_port',
  'temporal_tls',
  'temporal_tls_server_ca_cert_path',
  'temporal_tls_client_cert_path',
  'temporal_tls_client_key_path',
  'temporal_tls_server_name',
  'temporal_api_key',
  'otel_exporter_otlp_endpoint',
  'research_provider_base_url',
  'research_provider_model',
  'research_provider_quota_url',
  'research_provider_min_remaining_credits',
  'research_provider_request_reserve',
  'research_provider_timeout_sec',
];

/** The fields of every fragment, in FIELD_ORDER; a field in two fragments, or one without a place in the order, stops the process at its start. */
function inFieldOrder(): typeof ALL_FIELDS {
  const names = FRAGMENTS.flatMap((fragment) => Object.keys(fragment));
  const twice = names.filter((name, i) => names.indexOf(name) !== i);
  const placedTwice = FIELD_ORDER.filter((name, i) => FIELD_ORDER.indexOf(name) !== i);
  const unplaced = names.filter((name) => !FIELD_ORDER.includes(name as FieldName));
  if (twice.length > 0 || placedTwice.length > 0 || unplaced.length > 0 || FIELD_ORDER.length !== names.length) {
    throw new Error(
      `config fields do not compose: in two fragments [${twice.join(', ')}], twice in FIELD_ORDER [${placedTwice.join(', ')}], missing from FIELD_ORDER [${unplaced.join(', ')}]`,
    );
  }
  return Object.fromEntries(FIELD_ORDER.map((name) => [name, ALL_FIELDS[name]])) as typeof ALL_FIELDS;
}

/** The fields of the config file, in documentation order. Cross-field rules live in ConfigFileSchema. */
export const ConfigFieldsSchema = z.strictObject(inFieldOrder());

type ConfigFields = z.output<typeof ConfigFieldsSchema>;

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

/** One entry per config field, in schema order, for the configuration reference (docs/configuration.md). */
export function configFieldDocs(): ConfigFieldDoc[] {
  return fieldDocs(ConfigFieldsSchema);
}
