import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, type ConfigEnv } from '../config/load.ts';
import { NOT_IMPLEMENTED_FIELDS, configFieldDocs } from '../config/schema.ts';
import { renderConfigReference } from '../scripts/generate-config-docs.ts';

/**
 * No silent settings: a field whose feature is not built yet is marked in the generated reference, and a value other
 * than its default logs one warning naming it.
 */

const dirs: string[] = [];
afterAll(() => Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true }))));

const BASE = {
  control_api_bearer_token: 'ctl_9f8e7d6c5b4a39281706f5e4d3c2b1a0',
  completion_callback_url: 'http://127.0.0.1:9000/callback',
  completion_callback_token: 'cb_0a1b2c3d4e5f60718293a4b5c6d7e8f9',
  state_dir: 'state',
  project_root: 'projects',
  dispatch_script_path: 'bin/dispatch.sh',
};

async function warningsOf(extra: Record<string, unknown>, env: ConfigEnv = {}): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'rcp-not-implemented-'));
  dirs.push(dir);
  const path = join(dir, 'config.json');
  await writeFile(path, JSON.stringify({ ...BASE, ...extra }), { mode: 0o600 });
  const result = loadConfig({ env: { SVC_CONFIG: path, ...env }, cwd: dir });
  if (!result.ok) throw new Error(result.problems.join('\n'));
  return result.warnings;
}

/** A value of the field's type that differs from its default (and passes the cross-field rules alone or together). */
const NON_DEFAULT: Record<string, unknown> = {
  push_alerts_enabled: true,
  push_app_token: 'push-app-token-value',
  push_user_key: 'push-user-key-value',
  push_api_url: 'https://push.example.org/api',
  queue_alert_cooldown_sec: 60,
  queue_alert_hang_after_sec: 60,
  chat_alert_webhook_enabled: true,
  chat_alert_webhook_url: 'https://chat.example.org/hook',
  chat_alert_webhook_secret: 'chat-webhook-secret',
  chat_alert_webhook_timeout_sec: 3,
};

const notImplementedWarnings = (warnings: string[]) => warnings.filter((w) => w.includes('not implemented yet'));

describe('fields whose feature is not built yet', () => {
  it('are the alert fields, and nothing observability-related', () => {
    expect([...NOT_IMPLEMENTED_FIELDS].sort()).toEqual([...Object.keys(NON_DEFAULT)].sort());
    expect(NOT_IMPLEMENTED_FIELDS.some((field) => field.startsWith('route_observability_') || field.startsWith('operational_trace_'))).toBe(false);
  });

  it.each(Object.entries(NON_DEFAULT))('%s set to a non-default value logs exactly one warning naming it', async (field, value) => {
    const extra = { [field]: value };
    // Fields that require companions get them, and those companions warn too; only this field's line is counted.
    if (field === 'push_alerts_enabled') Object.assign(extra, { push_app_token: 'a-token-value-1', push_user_key: 'a-user-key-1', push_api_url: 'https://p.example.org' });
    if (field === 'chat_alert_webhook_enabled') Object.assign(extra, { chat_alert_webhook_url: 'https://c.example.org' });
    const warnings = notImplementedWarnings(await warningsOf(extra));
    const naming = warnings.filter((w) => w.startsWith(`${field}:`));
    expect(naming).toEqual([`${field}: not implemented yet; the value set has no effect (README "Configuration reference")`]);
    expect(warnings).toHaveLength(Object.keys(extra).length);
  });

  it('at their defaults (written out or left out), and with empty optional strings, log nothing', async () => {
    expect(notImplementedWarnings(await warningsOf({}))).toEqual([]);
    const defaults = {
      push_alerts_enabled: false,
      queue_alert_cooldown_sec: 1800,
      paper_writer_provider: 'deterministic',
      paper_writer_api_key: '',
      paper_writer_fallback_enabled: true,
      push_app_token: '',
      research_provider_base_url: '',
      core_store_backend: 'control_plane',
      legacy_notes_api_enabled: false,
    };
    expect(notImplementedWarnings(await warningsOf(defaults))).toEqual([]);
  });

  it('set through the environment, the provider keys (both built) warn about nothing', async () => {
    const warnings = notImplementedWarnings(await warningsOf({}, { PAPER_WRITER_API_KEY: 'env-paper-key-0123', RESEARCH_PROVIDER_API_KEY: 'env-research-key-0123' }));
    expect(warnings).toEqual([]);
  });

  it('are marked in the generated configuration reference, and no other field is', () => {
    const reference = renderConfigReference();
    for (const field of configFieldDocs()) {
      const row = reference.split('\n').find((line) => line.startsWith(`| \`${field.name}\` |`));
      expect(row, field.name).toBeDefined();
      expect(row!.includes('**Not implemented yet:**'), field.name).toBe(NOT_IMPLEMENTED_FIELDS.includes(field.name as never));
    }
    expect(reference).toMatch(/`RESEARCH_PROVIDER_API_KEY` sets `research_provider_api_key`/);
    expect(reference).not.toMatch(/`RESEARCH_PROVIDER_API_KEY` sets `research_provider_api_key` .*not implemented yet/);
  });
});
