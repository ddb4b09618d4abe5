import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';
import { isRecord, isSet } from './fields/field-kinds.ts';

/** The rules that join several fields of the config file, whichever rooms own them. */

export type ProblemSink = (path: (string | number)[], message: string) => void;

function requireWhen(raw: Record<string, unknown>, fields: string[], condition: string, report: ProblemSink): void {
  for (const field of fields) {
    if (!isSet(raw[field])) report([field], `is required when ${condition}`);
  }
}

// Reads the raw input (an absent field means its default) so that it can run even when
// single fields failed, and every problem is reported at once.
export function checkCrossFieldRules(raw: Record<string, unknown>, report: ProblemSink): void {
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
