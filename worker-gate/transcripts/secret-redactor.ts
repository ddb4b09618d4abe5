import { sha256Hex } from '../../platform/http/tokens.ts';

/** What stands in a transcript where a secret was. */
export const REDACTED = '[redacted]';

/** Values shorter than this are not taken for secrets: redacting "1" or "true" everywhere would garble every text. */
const MIN_SECRET_CHARS = 8;

/** The shape of a run's event token (randomToken: 32 bytes, base64url), found in text and checked against its digest. */
const EVENT_TOKEN_SHAPE = /(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g;

/**
 * Replaces the gate's secrets in an agent's text before it leaves the machine (docs/runs.md#following-a-run-live): the
 * gate's own tokens, the credential values it passes on to agents (agent_credential_env), and the run's event token,
 * which the gate keeps only as a digest and so recognises by shape.
 */
export function secretRedactor(secrets: readonly string[]): (text: string, eventTokenSha256?: string) => string {
  const known = [...new Set(secrets.filter((secret) => secret.length >= MIN_SECRET_CHARS))].sort((a, b) => b.length - a.length);
  return (text, eventTokenSha256) => {
    let out = text;
    for (const secret of known) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    if (eventTokenSha256) out = out.replace(EVENT_TOKEN_SHAPE, (candidate) => (sha256Hex(candidate) === eventTokenSha256 ? REDACTED : candidate));
    return out;
  };
}

/** The values of `names` in `env` that are secrets, not addresses: a base URL stays readable. */
export function credentialValues(env: NodeJS.ProcessEnv, names: readonly string[]): string[] {
  return names.filter((name) => !name.endsWith('_URL')).flatMap((name) => (env[name] ? [env[name]] : []));
}
