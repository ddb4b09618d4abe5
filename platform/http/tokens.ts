import { createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';

// crypto.hash, the one-shot form: a digest on every request, without a Hash object's cost.
const digest = (value: string) => hash('sha256', value, 'buffer');

/** Constant-time comparison over SHA-256 digests, so neither content nor length leaks through timing. */
export function tokensMatch(presented: string, expected: string): boolean {
  return timingSafeEqual(digest(presented), digest(expected));
}

/** `tokensMatch` against one expected token whose digest is taken once: every request pays for one digest, not two. */
export function tokenMatcher(expected: string): (presented: string) => boolean {
  const expectedDigest = digest(expected);
  return (presented) => timingSafeEqual(digest(presented), expectedDigest);
}

export const sha256Hex = (value: string) => hash('sha256', value, 'hex');

/** 256 bits from the OS CSPRNG, URL-safe. */
export const randomToken = () => randomBytes(32).toString('base64url');

/**
 * The CSRF token of a dashboard session is derived, not stored: only someone holding both the HttpOnly cookie value
 * and the server's key can compute it, and every tab of the session shares it.
 */
export function csrfTokenFor(sessionId: string, serverKey: string): string {
  return createHmac('sha256', serverKey).update(`csrf:${sessionId}`).digest('base64url');
}

const CALLBACK_FINGERPRINT_CONTEXT = 'research-control-plane completion_callback_token fingerprint v1';

/**
 * What a worker gate publishes of its completion_callback_token, so the control plane can tell before dispatching
 * whether the gate's callbacks will be accepted: an HMAC keyed by the token over a fixed label, cut to 64 bits. Unlike
 * a bare SHA-256 of the token, it matches no digest the token is stored or compared under anywhere else.
 */
export const callbackTokenFingerprint = (token: string) =>
  createHmac('sha256', token).update(CALLBACK_FINGERPRINT_CONTEXT).digest('hex').slice(0, 16);

const GATE_IDENTITY_CONTEXT = 'research-control-plane worker gate identity v1';

/**
 * A worker gate's answer to a caller's challenge: an HMAC keyed by worker_wake_gate_bearer_token. Only a process that
 * holds the token computes it, and the answer to one challenge tells nothing about the token or the next answer, so a
 * caller learns that the gate is the one it means before sending it the token as a bearer.
 */
export const gateIdentityProof = (token: string, challenge: string) =>
  createHmac('sha256', token).update(`${GATE_IDENTITY_CONTEXT}\0${challenge}`).digest('base64url');

/** Whether `proof` answers `challenge` for `token`, compared in constant time. */
export const gateIdentityProven = (token: string, challenge: string, proof: string) => tokensMatch(proof, gateIdentityProof(token, challenge));
