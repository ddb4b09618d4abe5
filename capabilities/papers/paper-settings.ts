import { join } from 'node:path';
import type { Config } from '../../platform/config/schema.ts';
import { serviceSecretsFrom, type ServiceSecrets } from '../../platform/config/service-secrets.ts';

/** What drafting papers needs from config (docs/papers.md#papers); the API key is here only, never in workflow inputs. */
export interface PaperSettings {
  /** Drafts go to `<state_dir>/papers/<paper_id>/`. */
  stateDir: string;
  /** The control plane's copy of each project is `<project_root>/<project_dir>`. */
  projectRoot: string;
  writer: {
    provider: 'deterministic' | 'openai_compatible';
    /** Set when provider is openai_compatible. */
    hosted: { base_url: string; model: string; api_key: string; timeout_ms: number; temperature: number; max_tokens: number } | null;
    fallback: boolean;
  };
  /** Set when paper_evidence_sync_enabled. */
  evidenceSync: { ssh_host: string; remote_root: string; timeout_ms: number; known_hosts_file: string } | null;
  /** This service's secret values: evidence holding one is refused (docs/security.md#security-model). */
  secrets: ServiceSecrets;
}

export function paperSettingsFrom(config: Config): PaperSettings {
  const hosted =
    config.paper_writer_provider === 'openai_compatible' && config.paper_writer_base_url && config.paper_writer_model
      ? {
          base_url: config.paper_writer_base_url,
          model: config.paper_writer_model,
          api_key: config.paper_writer_api_key,
          timeout_ms: config.paper_writer_timeout_sec * 1000,
          temperature: config.paper_writer_temperature,
          max_tokens: config.paper_writer_max_tokens,
        }
      : null;
  const sync =
    config.paper_evidence_sync_enabled && config.paper_evidence_sync_ssh_host && config.paper_evidence_sync_remote_root
      ? {
          ssh_host: config.paper_evidence_sync_ssh_host,
          remote_root: config.paper_evidence_sync_remote_root,
          timeout_ms: config.paper_evidence_sync_timeout_sec * 1000,
          known_hosts_file: join(config.state_dir, 'evidence-sync', 'known_hosts'),
        }
      : null;
  return {
    stateDir: config.state_dir,
    projectRoot: config.project_root,
    writer: { provider: config.paper_writer_provider, hosted, fallback: config.paper_writer_fallback_enabled },
    evidenceSync: sync,
    secrets: serviceSecretsFrom(config),
  };
}

/** The directory of a paper's drafts, relative to state_dir. paper_ids are `<slug>:<run_id>:draft`: one safe segment. */
export const paperDirOf = (paperId: string) => join('papers', paperId);
