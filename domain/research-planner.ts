/**
 * Deterministic planner of the Research Facility (interface.md "Research Facility ledgers", decisions §7).
 *
 * It scores candidate proposals, finds hard failures and decides admitted / rejected / merged / needs-review for
 * every candidate of a batch, with readable reasons. Pure: no I/O, no clock, no randomness; the same input always
 * gives the same output, and nothing depends on the key order of an object.
 *
 * SCORE (0–100)
 *   weighted = 2.6·novelty + 1.7·feasibility + 2.5·accessibility + 2.2·falsifiability, rounded to 0.1
 *   score    = clamp(weighted + mode bonus, 0, 100), rounded to 0.1
 *   Fallbacks: accessibility missing → 5 when accessibility_delta is given, else 0;
 *              falsifiability missing → 6 when both success_threshold and kill_condition are given, else 0.
 *   ("Missing" means absent or not a finite number. A non-finite novelty or feasibility counts as 0. A value outside
 *   the schema's 0–10, from a caller that bypassed CandidateProposalSchema, is clamped into 0–10 first.)
 *   Mode bonus, computed on the effective dimensions (after fallback):
 *     moonshot                     +4 if falsifiability ≥ 7, else −8
 *     home_hardware_accessibility  +4 if accessibility ≥ 7, else −5
 *     followup_from_negative       +3 with a novelty_comparison, else −8
 *     fresh_grounded +2, implementation_gap +2, paper_replication_extension +1, manual_import 0
 *   Since every dimension is within 0–10 the score can reach at most 90 + 4 = 94: the clamp at 100 is a guard that
 *   no input reaches with these weights. The clamp at 0 is reachable (a −8 bonus on a weak candidate).
 *
 * HARD FAILURES (each one a { code, message } naming the field or rule)
 *   missing_contract_field      one per missing field of the core contract: hypothesis, mechanism, baseline_to_beat,
 *                               success_threshold, kill_condition, estimated_runtime_class, expected_artifacts
 *                               (at least one non-blank item)
 *   missing_source_grounding    fresh_grounded (rule 1) or paper_replication_extension without any source_ids or
 *                               source_urls
 *   missing_parent_lineage      followup_from_negative without parent_project_id or parent_run_id (rule 2)
 *   missing_novelty_comparison  similar_prior_projects not empty but no novelty_comparison
 *   shallow_increment           the hypothesis or the mechanism is only a tweak of SHALLOW_INCREMENT_PATTERNS
 *                               (see the heuristic there)
 *   known_negative_rerun        dedupe_key equal to a known negative's, or text near-identical to one, and neither
 *                               a mechanism different from that negative's (compared normalized; a negative that
 *                               recorded no mechanism cannot be shown to differ) nor a novelty_comparison
 *
 * DECISION, per candidate, first rule that applies:
 *   1. any hard failure                                                   → rejected
 *   2. its dedupe_key already appeared EARLIER in this batch (rule 4)     → rejected (the first occurrence is judged
 *                                                                           normally, whatever its own decision)
 *   3. same dedupe_key as an existing candidate, else near-identical text → merged, merged_into = that candidate_id
 *      (dedupe_key matches win over text matches; among several, the smallest candidate_id, so the order of
 *      `existing` does not matter). Only admitted / needs-review candidates are passed in as `existing`.
 *   4. score ≥ minAdmissionScore (default 72)                             → admitted
 *   5. score ≥ 58                                                         → needs-review
 *   6. otherwise                                                          → rejected
 *
 * TEXT
 *   normalizeText: NFKC, lowercase, apostrophes dropped, every other run of non-letters/non-digits (punctuation,
 *   symbols, whitespace) turned into one space, trimmed. textFingerprint = normalized hypothesis + ' | ' +
 *   normalized mechanism. isNearIdentical: equal fingerprints (not both empty), or a token-set Jaccard index
 *   ≥ 0.9 over the words of hypothesis + mechanism when each side has at least 5 distinct words. 0.9 means one
 *   extra word in ten, or one substituted word in twenty; word order is ignored.
 */
import type { AdmissionDecision, CandidateProposal, GenerationMode } from './research-candidate.ts';

export const PLANNER_VERSION = 'planner.v1';
export const DEFAULT_MIN_ADMISSION_SCORE = 72;
export const NEEDS_REVIEW_MIN_SCORE = 58;

/** Weights of the four dimensions (each 0–10). Their sum ×10 is 90, the highest weighted score. */
export const SCORE_WEIGHTS = Object.freeze({ novelty: 2.6, feasibility: 1.7, accessibility: 2.5, falsifiability: 2.2 });
/** Effective accessibility when it is missing but accessibility_delta is given. */
export const ACCESSIBILITY_FALLBACK = 5;
/** Effective falsifiability when it is missing but success_threshold and kill_condition are both given. */
export const FALSIFIABILITY_FALLBACK = 6;
/** Token-set Jaccard index at or above which two texts are near-identical. */
export const NEAR_IDENTICAL_JACCARD = 0.9;
/** Distinct words each side needs before the Jaccard comparison applies (short texts must match exactly). */
export const NEAR_IDENTICAL_MIN_TOKENS = 5;
/** A field that matches a shallow pattern is a shallow increment when at most this many substantive words remain. */
export const SHALLOW_RESIDUAL_MAX_TOKENS = 2;

export interface ExistingCandidateRef {
  candidate_id: string;
  dedupe_key: string;
  hypothesis: string | null;
  mechanism: string | null;
}

/** A prior negative or mixed outcome; `reference` names the project or run. */
export interface KnownNegative {
  dedupe_key: string;
  hypothesis: string | null;
  mechanism: string | null;
  reference: string;
}

export interface PlannerContext {
  /** Admitted / needs-review candidates only: a rejected one never blocks a resubmission. */
  existing: readonly ExistingCandidateRef[];
  knownNegatives: readonly KnownNegative[];
  /** Default DEFAULT_MIN_ADMISSION_SCORE; must be a finite number within 0–100. */
  minAdmissionScore?: number;
}

export type HardFailureCode =
  | 'missing_contract_field'
  | 'missing_source_grounding'
  | 'missing_parent_lineage'
  | 'missing_novelty_comparison'
  | 'shallow_increment'
  | 'known_negative_rerun';

export interface HardFailure {
  code: HardFailureCode;
  message: string;
}

export interface ScoreBreakdown {
  novelty: number;
  feasibility: number;
  /** Effective value (after fallback). */
  accessibility: number;
  /** Effective value (after fallback). */
  falsifiability: number;
  accessibility_fallback: boolean;
  falsifiability_fallback: boolean;
  /** Weighted sum of the four dimensions, rounded to 0.1. */
  weighted: number;
  mode_bonus: number;
  mode_bonus_reason: string;
  /** clamp(weighted + mode_bonus, 0, 100), rounded to 0.1. */
  score: number;
}

export interface PlannedCandidate {
  /** Position in the input batch, from 0. */
  index: number;
  proposal: CandidateProposal;
  decision: AdmissionDecision;
  score: number;
  breakdown: ScoreBreakdown;
  hard_failures: HardFailure[];
  reasons: string[];
  merged_into: string | null;
  text_fingerprint: string;
}

export interface ShallowIncrementPattern {
  /** Applied to normalizeText(field); matches whole words only. */
  readonly pattern: RegExp;
  readonly label: string;
}

// ---------------------------------------------------------------------------------------------------------------
// Text

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

// ---------------------------------------------------------------------------------------------------------------
// Shallow increments

/** Whole-word phrase over normalized text (words separated by single spaces). */
function phrase(...alternatives: string[]): RegExp {
  return new RegExp(`(?<=^| )(?:${alternatives.join('|')})(?= |$)`, 'u');
}

const W = '[\\p{L}\\p{N}]+';
const DET = '(?:(?:the|a|an|our|its|their|some) )?';
const ADJ = '(?:(?:higher|lower|smaller|larger|bigger|different|new|better|best|optimal|tuned|other|another|slightly|much|more|less) ){0,2}';
const TUNE_VERB =
  '(?:re ?tune|re ?tunes|re ?tuned|re ?tuning|tune|tunes|tuned|tuning|adjust|adjusts|adjusted|adjusting|' +
  'change|changes|changed|changing|increase|increases|increased|increasing|decrease|decreases|decreased|decreasing|' +
  'lower|lowers|lowered|lowering|raise|raises|raised|raising|reduce|reduces|reduced|reducing|' +
  'sweep|sweeps|sweeping|swept|vary|varies|varied|varying|halve|halves|halved|halving|' +
  'double|doubles|doubled|doubling|tweak|tweaks|tweaked|tweaking|modify|modifies|modified|modifying|' +
  'optimi[sz]e|optimi[sz]es|optimi[sz]ed|optimi[sz]ing|search|searching|set|sets|setting|' +
  'use|uses|using|try|tries|trying|pick|picks|picking|bump|bumps|bumped|bumping)';
const PASSIVE =
  '(?:(?:is|are|was|were|gets|get|being|be) )?(?:tuned|retuned|adjusted|changed|increased|decreased|lowered|raised|' +
  'reduced|halved|doubled|tweaked|modified|swept|optimi[sz]ed|varied)';
const TWEAK_NOUN =
  '(?:tuning|retuning|sweep|sweeps|search|searches|adjustment|adjustments|change|changes|increase|decrease|' +
  'reduction|tweak|tweaks|tweaking|optimi[sz]ation)';

/** Knob phrases: the thing tweaked. */
const LR = '(?:(?:initial|base|peak|max|maximum|global) )?(?:learning rates?|lr|lrs)(?: (?:schedule|warmup|decay))?';
const HP =
  '(?:hyper ?parameters?|hparams?|dropout(?: rates?)?|weight decay|momentum|warm ?up(?: steps)?|optimi[sz]er settings)';
const BS = '(?:(?:micro|mini|global|effective) ?)?batch ?sizes?';
const SEED = '(?:random )?seeds?';

/** Knob tweaks: verb + knob ("lower the learning rate"), knob + noun ("lr sweep"), passive, comparative + knob. */
function knobTweak(knob: string): string[] {
  return [
    `${TUNE_VERB} (?:over |with |for |of |on )?${DET}${ADJ}${knob}`,
    `${knob} ${TWEAK_NOUN}`,
    `${knob} ${PASSIVE}`,
    `(?:higher|lower|smaller|larger|bigger|different|new|tuned|retuned) ${knob}`,
  ];
}

/**
 * Shallow-increment patterns, applied to normalizeText(hypothesis) and normalizeText(mechanism) separately.
 *
 * HEURISTIC — "the change itself is only such a tweak": a pattern match alone does not fail a candidate, since a
 * legitimate hypothesis may mention a learning rate inside a real mechanism. A field is a shallow increment when
 * at least one pattern matches AND, once every matched phrase (and every bare knob name: learning rate, dropout,
 * weight decay, batch size, seed, epochs, layers, optimizer, schedule…) is taken out, at most
 * SHALLOW_RESIDUAL_MAX_TOKENS (2) substantive words remain. Not substantive: numbers and words with a digit ("1e 4", "7b", "cifar 10" → only
 * "cifar" counts), one-letter words, and the filler list below (articles, pronouns, modal verbs, "only/just/simply",
 * outcome words such as improve/accuracy/loss/performance/baseline/model). So "Lower the learning rate to 1e-4 to
 * improve accuracy on CIFAR-10" is shallow (one word left, "cifar"), while "Warmup can be dropped if the learning
 * rate is increased only after the curvature estimate falls below a threshold" is not (many words left). The
 * heuristic prefers missing a long-winded shallow candidate to rejecting a real one; the score and review remain.
 */
export const SHALLOW_INCREMENT_PATTERNS: readonly ShallowIncrementPattern[] = Object.freeze([
  { label: 'only tunes the learning rate', pattern: phrase(...knobTweak(LR)) },
  {
    label: 'only tunes hyperparameters',
    pattern: phrase(
      ...knobTweak(HP),
      'grid search(?:es)?',
      `(?:random|bayesian) search (?:over|of) ${DET}${HP}`,
    ),
  },
  {
    label: 'only changes the batch size',
    pattern: phrase(...knobTweak(BS), `(?:larger|bigger|smaller|huger) (?:mini ?)?batch(?:es)?`),
  },
  {
    label: 'reruns with a different seed',
    pattern: phrase(
      ...knobTweak(SEED),
      `(?:re ?run|re ?runs|re ?running|re ?ran|repeat|repeats|repeated|repeating|retrain|retrains|retrained|retraining|` +
        `run|runs|running|ran|train|trains|training|evaluate|evaluating)(?: ${W}){0,4}? with ${DET}` +
        `(?:different|new|another|other|fresh|more|several|multiple|extra|additional|[\\p{N}]+) ${SEED}`,
      `(?:different|another|fresh) ${SEED}`,
    ),
  },
  {
    label: 'reruns the same experiment',
    pattern: phrase(
      `(?:re ?run|re ?runs|re ?running|rerun|repeat|repeats|repeating|redo|redoing)(?: the| a| our)?(?: same)?` +
        ` (?:experiment|experiments|baseline|run|runs|training|evaluation)(?: again)?`,
      `(?:run|train|evaluate) (?:it|the baseline|the same experiment) again`,
    ),
  },
  {
    label: 'trains longer / more epochs',
    pattern: phrase(
      `(?:train|trains|trained|training|fine ?tune|fine ?tunes|fine ?tuning|pre ?train|pre ?training)(?: ${W}){0,3}? ` +
        `(?:for )?longer(?! (?:sequences?|contexts?|context windows?|inputs?|documents?|prompts?|horizons?|videos?|` +
        `texts?|chains?|trajector(?:y|ies)|rollouts?|episodes?))`,
      `(?:[\\p{N}]+ |many |a few )?(?:more|additional|extra) (?:training )?(?:epochs|steps|iterations|updates)`,
      `(?:longer|extended|prolonged) (?:training|schedule|training schedule|training run|training runs|runs?)`,
      `(?:increase|increases|increased|increasing|double|doubles|doubled|doubling|triple|tripled|tripling|` +
        `extend|extends|extended|extending) ${DET}(?:number of )?(?:training )?` +
        `(?:epochs|steps|iterations|training time|training budget|training duration|schedule)`,
    ),
  },
  {
    label: 'adds more layers',
    pattern: phrase(
      `(?:add|adds|added|adding|stack|stacks|stacked|stacking|insert|inserts|inserting|append|appends|appending) ` +
        `(?:a few|some|more|extra|additional|another|two|three|four|five|several|[\\p{N}]+) ` +
        `(?:more |extra |additional )?(?:${W} )?(?:layers?|blocks?)`,
      `(?:more|extra|additional) (?:${W} )?layers`,
      `(?:make|makes|making|made) ${DET}(?:model|network|net|it|transformer|mlp|encoder|decoder|backbone) ` +
        `(?:deeper|wider)`,
      `(?:increase|increases|increased|increasing|double|doubles|doubled|doubling) ${DET}` +
        `(?:number of layers|layer count|depth|width|hidden size|hidden dimension|model depth|model width|number of blocks)`,
      `(?:deeper|wider) (?:model|network|net|transformer|mlp|encoder|decoder|backbone)`,
    ),
  },
  {
    label: 'scales up the model',
    pattern: phrase(
      `(?:scale|scales|scaled|scaling) up`,
      `(?:scale|scales|scaled|scaling) ${DET}(?:model|network|net|parameter count|parameters|backbone|architecture) up`,
      `(?:bigger|larger) (?:model|models|network|networks|backbone|checkpoint|variant)`,
      `(?:increase|increases|increased|increasing|grow|grows|growing|double|doubling) ${DET}` +
        `(?:model size|model capacity|parameter count|number of parameters|model parameters)`,
      `more parameters`,
    ),
  },
  {
    label: 'a minor tweak',
    pattern: phrase(
      `(?:minor|small|slight|tiny|trivial|cosmetic|marginal) (?:tweak|tweaks|change|changes|adjustment|adjustments|` +
        `modification|modifications|fix|fixes|update|updates|edit|edits)`,
      `(?:tweak|tweaks|tweaked|tweaking) ${DET}(?:baseline|config|configuration|settings|setup|recipe|code|parameters)`,
      `slightly (?:modify|modifies|modified|modifying|change|changes|changed|changing|adjust|adjusts|adjusted|adjusting)`,
    ),
  },
  {
    label: 'renaming / reformatting only',
    pattern: phrase(
      `(?:rename|renames|renamed|renaming|reformat|reformats|reformatted|reformatting|restyle|restyles|restyled|` +
        `restyling|prettify|prettifies|prettified|prettifying|lint|linting)`,
      `(?:refactor|refactors|refactored|refactoring|clean up|cleans up|cleaned up|cleaning up) ${DET}` +
        `(?:code|codebase|script|scripts|repository|repo|notebook|notebooks)`,
    ),
  },
]);

/**
 * Bare knob names ("the dropout rate and weight decay", "epochs", "layers"). Once a pattern has matched, these
 * count as part of the tweak, never as substance; on their own they never make a field shallow.
 */
const KNOB_WORDS = new RegExp(
  phrase(LR, HP, BS, SEED, 'epochs?', 'layers?', 'blocks?', 'batch(?:es)?', 'optimi[sz]ers?', 'schedules?').source,
  'gu',
);

const GLOBAL_SHALLOW = SHALLOW_INCREMENT_PATTERNS.map((p) => ({
  label: p.label,
  regex: new RegExp(p.pattern.source, `${p.pattern.flags}g`),
}));

/** Words that carry no substance of their own once the tweak phrase is taken out (see the heuristic above). */
const SHALLOW_FILLER: ReadonlySet<string> = new Set(
  (
    'a an the this that these those it its we our us i you they their them he she his her one ' +
    'to of on in for with by from into onto over under at as than then so and or but nor if when while whether ' +
    'will would should shall can could may might must be is are was were been being do does did done has have had ' +
    'only just simply merely also again instead still even already further rather very much more most less ' +
    'lets let try tries trying tried see make makes making get gets getting keep keeps everything else nothing ' +
    'other otherwise unchanged same existing current default value values setting settings config configuration ' +
    'higher lower larger smaller bigger new different slightly bit little many few some any all each both ' +
    'up down out about via use uses using used what which how there here not no per times ' +
    'improve improves improved improving improvement improvements boost boosts boosted gain gains help helps ' +
    'better best good worse performance accuracy acc loss losses score scores metric metrics result results ' +
    'quality throughput speed faster convergence converge converges stable stability generalization ' +
    'validation val test tests eval evaluation benchmark benchmarks baseline baselines reference ' +
    'model models network networks run runs experiment experiments train training trained ' +
    'epoch epochs step steps parameters parameter params ' +
    'hypothesis mechanism change changes tweak tweaks increase decrease reduce ' +
    'code script scripts variables variable functions function files file names naming style formatting format'
  ).split(' '),
);

interface ShallowFinding {
  labels: string[];
  phrases: string[];
}

/** Labels and matched phrases when `text` is a shallow increment (see the heuristic), else null. */
function shallowFinding(text: string | null | undefined): ShallowFinding | null {
  const norm = normalizeText(text);
  if (norm === '') return null;
  const covered = new Array<boolean>(norm.length).fill(false);
  const labels: string[] = [];
  const phrases: string[] = [];
  for (const { label, regex } of GLOBAL_SHALLOW) {
    let hit = false;
    for (const m of norm.matchAll(regex)) {
      hit = true;
      const start = m.index;
      for (let i = start; i < start + m[0].length; i += 1) covered[i] = true;
      if (!phrases.includes(m[0])) phrases.push(m[0]);
    }
    if (hit) labels.push(label);
  }
  if (labels.length === 0) return null;
  for (const m of norm.matchAll(KNOB_WORDS)) {
    for (let i = m.index; i < m.index + m[0].length; i += 1) covered[i] = true;
  }
  let substantive = 0;
  for (const m of norm.matchAll(/[^ ]+/g)) {
    const word = m[0];
    if (covered[m.index]) continue;
    if (word.length < 2 || /\p{N}/u.test(word) || SHALLOW_FILLER.has(word)) continue;
    substantive += 1;
  }
  return substantive <= SHALLOW_RESIDUAL_MAX_TOKENS ? { labels, phrases } : null;
}

// ---------------------------------------------------------------------------------------------------------------
// Scoring

function round1(x: number): number {
  const r = Math.round(x * 10 + 1e-9) / 10;
  return r === 0 ? 0 : r; // no −0
}

function present(s: string | null | undefined): s is string {
  return typeof s === 'string' && s.trim().length > 0;
}

/** A usable dimension value: finite, clamped into the schema's 0–10; null when absent or not finite. */
function dimensionOrNull(x: number | null | undefined): number | null {
  return typeof x === 'number' && Number.isFinite(x) ? Math.min(10, Math.max(0, x)) : null;
}

function nonEmptyList(xs: readonly string[] | null | undefined): boolean {
  return Array.isArray(xs) && xs.some((x) => present(x));
}

function fmt(x: number): string {
  return x.toFixed(1);
}

function modeBonus(
  p: CandidateProposal,
  mode: GenerationMode,
  accessibility: number,
  falsifiability: number,
): { bonus: number; reason: string } {
  switch (mode) {
    case 'moonshot':
      return falsifiability >= 7
        ? { bonus: 4, reason: `moonshot: falsifiability ${falsifiability} ≥ 7 (+4)` }
        : { bonus: -8, reason: `moonshot: falsifiability ${falsifiability} < 7 (−8)` };
    case 'home_hardware_accessibility':
      return accessibility >= 7
        ? { bonus: 4, reason: `home_hardware_accessibility: accessibility ${accessibility} ≥ 7 (+4)` }
        : { bonus: -5, reason: `home_hardware_accessibility: accessibility ${accessibility} < 7 (−5)` };
    case 'followup_from_negative':
      return present(p.novelty_comparison)
        ? { bonus: 3, reason: 'followup_from_negative: novelty_comparison given (+3)' }
        : { bonus: -8, reason: 'followup_from_negative: no novelty_comparison (−8)' };
    case 'fresh_grounded':
      return { bonus: 2, reason: 'fresh_grounded (+2)' };
    case 'implementation_gap':
      return { bonus: 2, reason: 'implementation_gap (+2)' };
    case 'paper_replication_extension':
      return { bonus: 1, reason: 'paper_replication_extension (+1)' };
    case 'manual_import':
      return { bonus: 0, reason: 'manual_import (no bonus)' };
    default:
      return { bonus: 0, reason: `unknown generation_mode '${String(mode)}' (no bonus)` };
  }
}

export function scoreCandidate(p: CandidateProposal): ScoreBreakdown {
  const novelty = dimensionOrNull(p.novelty) ?? 0;
  const feasibility = dimensionOrNull(p.feasibility) ?? 0;
  const givenAccessibility = dimensionOrNull(p.accessibility);
  const givenFalsifiability = dimensionOrNull(p.falsifiability);
  const accessibility =
    givenAccessibility ?? (present(p.accessibility_delta) ? ACCESSIBILITY_FALLBACK : 0);
  const falsifiability =
    givenFalsifiability ??
    (present(p.success_threshold) && present(p.kill_condition) ? FALSIFIABILITY_FALLBACK : 0);
  const weighted = round1(
    SCORE_WEIGHTS.novelty * novelty +
      SCORE_WEIGHTS.feasibility * feasibility +
      SCORE_WEIGHTS.accessibility * accessibility +
      SCORE_WEIGHTS.falsifiability * falsifiability,
  );
  const { bonus, reason } = modeBonus(p, p.generation_mode, accessibility, falsifiability);
  const score = Math.min(100, Math.max(0, round1(weighted + bonus)));
  return {
    novelty,
    feasibility,
    accessibility,
    falsifiability,
    accessibility_fallback: givenAccessibility === null,
    falsifiability_fallback: givenFalsifiability === null,
    weighted,
    mode_bonus: bonus,
    mode_bonus_reason: reason,
    score,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Hard failures

const CONTRACT_TEXT_FIELDS = [
  ['hypothesis', 'the claim the experiment tests'],
  ['mechanism', 'why the change should work'],
  ['baseline_to_beat', 'what the result must beat'],
  ['success_threshold', 'what counts as success'],
  ['kill_condition', 'when to stop and call the result negative'],
] as const;

function quote(s: string, max = 80): string {
  return `"${s.length > max ? `${s.slice(0, max - 1)}…` : s}"`;
}

export function hardFailures(p: CandidateProposal, knownNegatives: readonly KnownNegative[]): HardFailure[] {
  const out: HardFailure[] = [];
  const fail = (code: HardFailureCode, message: string) => out.push({ code, message });

  for (const [field, meaning] of CONTRACT_TEXT_FIELDS) {
    if (!present(p[field])) fail('missing_contract_field', `missing core contract field '${field}' (${meaning})`);
  }
  if (!present(p.estimated_runtime_class)) {
    fail('missing_contract_field', "missing core contract field 'estimated_runtime_class' (how long it runs)");
  }
  if (!nonEmptyList(p.expected_artifacts)) {
    fail('missing_contract_field', "missing core contract field 'expected_artifacts' (at least one expected artifact)");
  }

  const hasSource = nonEmptyList(p.source_ids) || nonEmptyList(p.source_urls);
  if (p.generation_mode === 'fresh_grounded' && !hasSource) {
    fail(
      'missing_source_grounding',
      'fresh_grounded candidate has no source evidence: source_ids and source_urls are empty (rule 1 requires at least one source reference)',
    );
  }
  if (p.generation_mode === 'paper_replication_extension' && !hasSource) {
    fail(
      'missing_source_grounding',
      'paper_replication_extension candidate has no paper/source lineage: source_ids and source_urls are empty',
    );
  }
  if (p.generation_mode === 'followup_from_negative' && !present(p.parent_project_id) && !present(p.parent_run_id)) {
    fail(
      'missing_parent_lineage',
      'followup_from_negative candidate has no parent lineage: parent_project_id and parent_run_id are both missing (rule 2)',
    );
  }
  const similar = (p.similar_prior_projects ?? []).filter((s) => present(s));
  if (similar.length > 0 && !present(p.novelty_comparison)) {
    fail(
      'missing_novelty_comparison',
      `similar_prior_projects lists ${similar.length} project(s) (${similar.join(', ')}) but novelty_comparison is missing`,
    );
  }

  for (const field of ['hypothesis', 'mechanism'] as const) {
    const finding = shallowFinding(p[field]);
    if (finding) {
      fail(
        'shallow_increment',
        `shallow increment: the ${field} ${finding.labels.join('; ')} (${finding.phrases.map((x) => quote(x)).join(', ')}) ` +
          'and states no other substantive change',
      );
    }
  }

  const mechanism = normalizeText(p.mechanism);
  const explained = present(p.novelty_comparison);
  for (const neg of knownNegatives) {
    const sameKey = neg.dedupe_key === p.dedupe_key;
    if (!sameKey && !isNearIdentical(p, neg)) continue;
    if (explained) continue;
    const negMechanism = normalizeText(neg.mechanism);
    if (negMechanism !== '' && mechanism !== '' && negMechanism !== mechanism) continue;
    const match = sameKey ? `same dedupe_key '${p.dedupe_key}'` : 'near-identical hypothesis and mechanism';
    const why =
      negMechanism === ''
        ? 'the negative recorded no mechanism, so a new one cannot be shown, and there is no novelty_comparison'
        : mechanism === ''
          ? 'there is no mechanism and no novelty_comparison'
          : 'the mechanism is the same and there is no novelty_comparison';
    fail('known_negative_rerun', `re-runs known negative ${neg.reference} (${match}): ${why} explaining what is new`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Batch

function byCandidateId(a: ExistingCandidateRef, b: ExistingCandidateRef): number {
  return a.candidate_id < b.candidate_id ? -1 : a.candidate_id > b.candidate_id ? 1 : 0;
}

export function planBatch(proposals: readonly CandidateProposal[], context: PlannerContext): PlannedCandidate[] {
  const minAdmission = context.minAdmissionScore ?? DEFAULT_MIN_ADMISSION_SCORE;
  if (!Number.isFinite(minAdmission) || minAdmission < 0 || minAdmission > 100) {
    throw new RangeError(`minAdmissionScore must be a finite number within 0–100, got ${String(minAdmission)}`);
  }
  const existing = [...context.existing].sort(byCandidateId);
  const firstIndexByKey = new Map<string, number>();
  const planned: PlannedCandidate[] = [];

  proposals.forEach((proposal, index) => {
    const breakdown = scoreCandidate(proposal);
    const score = breakdown.score;
    const failures = hardFailures(proposal, context.knownNegatives);
    const reasons: string[] = [];
    let decision: AdmissionDecision;
    let mergedInto: string | null = null;

    const earlier = firstIndexByKey.get(proposal.dedupe_key);
    if (earlier === undefined) firstIndexByKey.set(proposal.dedupe_key, index);

    if (failures.length > 0) {
      decision = 'rejected';
      reasons.push(...failures.map((f) => f.message));
      reasons.push(
        `rejected: ${failures.length} hard failure${failures.length === 1 ? '' : 's'} (score ${fmt(score)} not considered)`,
      );
    } else if (earlier !== undefined) {
      decision = 'rejected';
      reasons.push(
        `duplicate dedupe_key '${proposal.dedupe_key}' earlier in this batch (candidate ${earlier}): rejected (rule 4)`,
      );
    } else {
      const byKey = existing.find((e) => e.dedupe_key === proposal.dedupe_key);
      const byText = byKey ? undefined : existing.find((e) => isNearIdentical(proposal, e));
      const target = byKey ?? byText;
      if (target) {
        decision = 'merged';
        mergedInto = target.candidate_id;
        reasons.push(
          byKey
            ? `merged into ${target.candidate_id}: same dedupe_key '${proposal.dedupe_key}'`
            : `merged into ${target.candidate_id}: near-identical hypothesis and mechanism`,
        );
      } else {
        const composition = `score ${fmt(score)} = weighted ${fmt(breakdown.weighted)} + mode bonus ${breakdown.mode_bonus} (${breakdown.mode_bonus_reason})`;
        reasons.push(composition);
        if (score >= minAdmission) {
          decision = 'admitted';
          reasons.push(`score ${fmt(score)} ≥ ${minAdmission}: admitted`);
        } else if (score >= NEEDS_REVIEW_MIN_SCORE) {
          decision = 'needs-review';
          reasons.push(`score ${fmt(score)} < ${minAdmission} and ≥ ${NEEDS_REVIEW_MIN_SCORE}: needs-review`);
        } else {
          decision = 'rejected';
          reasons.push(`score ${fmt(score)} < ${Math.min(minAdmission, NEEDS_REVIEW_MIN_SCORE)}: rejected`);
        }
      }
    }

    planned.push({
      index,
      proposal,
      decision,
      score,
      breakdown,
      hard_failures: failures,
      reasons,
      merged_into: mergedInto,
      text_fingerprint: textFingerprint(proposal),
    });
  });
  return planned;
}
