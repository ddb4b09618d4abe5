import { operationalTracePath } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { OperationalTrace } from './operational-trace.ts';

/** Every secret value this process is configured with or reads from its environment. */
function configuredSecrets(config: Config, env: NodeJS.ProcessEnv): string[] {
  const values = [
    config.control_api_bearer_token,
    config.worker_wake_gate_bearer_token,
    config.completion_callback_token,
    config.paper_writer_api_key,
    config.research_provider_api_key,
    config.push_app_token,
    config.push_user_key,
    config.chat_alert_webhook_secret,
    config.pg_database_url,
    config.pg_database_url ? safePassword(config.pg_database_url) : undefined,
    env.RESEARCH_PROVIDER_API_KEY,
    env.PAPER_WRITER_API_KEY,
    ...Object.values(config.worker_targets).map((target) => target.bearer_token),
  ];
  return [...new Set(values.filter((v): v is string => typeof v === 'string' && v !== ''))];
}

function safePassword(url: string): string | undefined {
  try {
    return decodeURIComponent(new URL(url).password) || undefined;
  } catch {
    return undefined;
  }
}

/** The trace this process writes to, or undefined when operational_trace_enabled is false. */
export function operationalTraceFrom(config: Config, env: NodeJS.ProcessEnv = process.env): OperationalTrace | undefined {
  if (!config.operational_trace_enabled) return undefined;
  return new OperationalTrace({
    path: operationalTracePath(config),
    maxPayloadBytes: config.operational_trace_max_payload_bytes,
    secrets: configuredSecrets(config, env),
    redactPromptText: config.operational_trace_redact_prompt_text,
  });
}
