import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configFingerprint } from '../../platform/config/fingerprint.ts';
import { ConfigFieldsSchema, ConfigFileSchema, configFieldDocs, type Config } from '../../platform/config/schema.ts';

/**
 * The config's fields, in order, are frozen in test/fixtures/config-fields.json: the schema is composed from one
 * fragment per room, and the order of its fields is the order of the configuration reference, while the set of fields
 * (with their defaults) makes up the fingerprint that control-plane replicas compare. A field added, removed or moved
 * is a deliberate change of that fixture, never a side effect of moving a fragment.
 */

type Frozen = { fields: string[]; example_fingerprint: string };

const frozen = JSON.parse(readFileSync(new URL('../fixtures/config-fields.json', import.meta.url), 'utf8')) as Frozen;

describe('the config fields', () => {
  it('are the frozen ones, in the frozen order', () => {
    expect(Object.keys(ConfigFieldsSchema.shape)).toEqual(frozen.fields);
  });

  it('are documented in the same order', () => {
    expect(configFieldDocs().map((doc) => doc.name)).toEqual(frozen.fields);
  });

  it('give an unchanged fingerprint for the same config', () => {
    const config = ConfigFileSchema.parse({
      roles: ['control_plane'],
      control_api_bearer_token: 'replica-control-token-0123456789',
      completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
      completion_callback_token: 'replica-callback-token-0123456789',
      state_dir: '/s',
      project_root: '/p',
      chat_alert_webhook_secret: 'abcdefabcdefabcdef',
    }) as Config;
    expect(configFingerprint(config).fingerprint).toBe(frozen.example_fingerprint);
  });
});
