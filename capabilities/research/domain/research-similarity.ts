/**
 * Text similarity of research candidates: normalized text, fingerprints and the near-duplicate test the planner uses
 * for merges and known-negative re-runs (docs/research.md#research-facility-intake).
 *
 * normalizeText: NFKC, lowercase, apostrophes dropped, every other run of non-letters/non-digits (punctuation,
 * symbols, whitespace) turned into one space, trimmed. textFingerprint = normalized hypothesis + ' | ' + normalized
 * mechanism. isNearIdentical: equal fingerprints (not both empty), or a token-set Jaccard index ≥ 0.9 over the words
 * of hypothesis + mechanism when each side has at least 5 distinct words. 0.9 means one extra word in ten, or one
 * substituted word in twenty; word order is ignored.
 */

/** Token-set Jaccard index at or above which two texts are near-identical. */
export const NEAR_IDENTICAL_JACCARD = 0.9;
/** Distinct words each side needs before the Jaccard comparison applies (short texts must match exactly). */
export const NEAR_IDENTICAL_MIN_TOKENS = 5;

/** Lowercase, NFKC, apostrophes dropped, every other run of punctuation / symbols / whitespace → one space, trimmed. */
export function normalizeText(value: string | null | undefined): string {
  if (value === null || value === undefined) return '';
  return value
    .normalize('NFKC')
    .toLowerCase()
    .replace(/['’‘`]/g, '')
    .replace(/[^\p{L}\p{M}\p{N}]+/gu, ' ')
    .trim();
}

type TextPair = { hypothesis?: string | null | undefined; mechanism?: string | null | undefined };

/** normalizeText(hypothesis) + ' | ' + normalizeText(mechanism). */
export function textFingerprint(p: TextPair): string {
  return `${normalizeText(p.hypothesis)} | ${normalizeText(p.mechanism)}`;
}

function tokenSet(p: TextPair): Set<string> {
  const words = `${normalizeText(p.hypothesis)} ${normalizeText(p.mechanism)}`.split(' ');
  return new Set(words.filter((w) => w.length > 0));
}

/**
 * Equal fingerprints (at least one of the two texts present), or Jaccard(tokens(a), tokens(b)) ≥ 0.9 where
 * tokens() is the set of words of hypothesis + mechanism and both sets hold at least 5 words.
 */
export function isNearIdentical(a: TextPair, b: TextPair): boolean {
  const ha = normalizeText(a.hypothesis);
  const ma = normalizeText(a.mechanism);
  const hb = normalizeText(b.hypothesis);
  const mb = normalizeText(b.mechanism);
  if ((ha === '' && ma === '') || (hb === '' && mb === '')) return false;
  if (ha === hb && ma === mb) return true;
  const ta = tokenSet(a);
  const tb = tokenSet(b);
  if (ta.size < NEAR_IDENTICAL_MIN_TOKENS || tb.size < NEAR_IDENTICAL_MIN_TOKENS) return false;
  let shared = 0;
  for (const t of ta) if (tb.has(t)) shared += 1;
  const union = ta.size + tb.size - shared;
  // The epsilon keeps exact ratios such as 9/10 or 18/20 on the inclusive side of the threshold.
  return shared / union >= NEAR_IDENTICAL_JACCARD - 1e-12;
}
