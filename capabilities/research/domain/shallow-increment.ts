/**
 * Shallow-increment grammar of the planner: phrases that describe only a tweak of a known knob (learning rate,
 * hyperparameters, batch size, seed, epochs, layers, model size, cosmetic edits), and the test whether a field states
 * nothing beyond such a tweak.
 */
import { normalizeText } from './research-similarity.ts';

/** A field that matches a shallow pattern is a shallow increment when at most this many substantive words remain. */
export const SHALLOW_RESIDUAL_MAX_TOKENS = 2;

export interface ShallowIncrementPattern {
  /** Applied to normalizeText(field); matches whole words only. */
  readonly pattern: RegExp;
  readonly label: string;
}

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

export interface ShallowFinding {
  labels: string[];
  phrases: string[];
}

/** Labels and matched phrases when `text` is a shallow increment (see the heuristic), else null. */
export function shallowFinding(text: string | null | undefined): ShallowFinding | null {
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
