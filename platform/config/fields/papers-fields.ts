import { z } from 'zod';
import { doc, optionalHttpUrl, text } from './field-kinds.ts';

export const PAPER_WRITER_PROVIDERS = ['deterministic', 'openai_compatible'] as const;

/** The papers room's fields: the paper writer, the paper steps' slots, evidence sync. */
export const papersFields = {
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
};
