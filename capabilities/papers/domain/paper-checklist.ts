/**
 * The automated checklist (docs/papers.md#papers): judges the items a machine can check on a draft, with a note for each,
 * and leaves the items that need a person pending. Pure: the activity that runs it reads the files and passes them in.
 */
import { DRAFT_SECTIONS, formatNumber, type ResultValue } from './paper-draft.ts';
import { HUMAN_CHECKLIST_ITEM_IDS, type ChecklistItemId, type ChecklistStatus } from './paper-status.ts';

export interface DraftUnderReview {
  /** The draft's Markdown, or null when the artifact could not be read back. */
  markdown: string | null;
  title: string;
  abstract: string;
  /** Every number in the run's results files. */
  results: readonly ResultValue[];
}

export interface ChecklistJudgement {
  item_id: ChecklistItemId;
  status: ChecklistStatus;
  note: string;
}

export const TITLE_CHARS = { min: 10, max: 200 } as const;
export const ABSTRACT_CHARS = { min: 50, max: 2_000 } as const;

/** The text of each `## ` section, by heading. */
function sections(markdown: string): Map<string, string> {
  const found = new Map<string, string>();
  let current: string | null = null;
  for (const line of markdown.split('\n')) {
    const heading = /^## (.+)$/.exec(line);
    if (heading) {
      current = heading[1]!.trim();
      found.set(current, '');
    } else if (current !== null) {
      found.set(current, `${found.get(current)}${line}\n`);
    }
  }
  return found;
}

/** Numbers written in prose and tables, outside code spans and quoted notes (names, ids and the agent's own words). */
export function claimedNumbers(text: string): string[] {
  const prose = text
    .split('\n')
    .filter((line) => !line.startsWith('>'))
    .join('\n')
    .replace(/`[^`\n]*`/g, ' ');
  return [...prose.matchAll(/(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.]*\w)/gi)].map((match) => match[0]);
}

function judgeReadability(draft: DraftUnderReview): ChecklistJudgement {
  return draft.markdown === null || draft.markdown.trim() === ''
    ? { item_id: 'artifact_readability', status: 'fail', note: 'the draft artifact could not be read back, or it is empty' }
    : { item_id: 'artifact_readability', status: 'pass', note: `the draft reads back as ${draft.markdown.length} characters of Markdown` };
}

function judgeTitleAbstract(draft: DraftUnderReview): ChecklistJudgement {
  const problems: string[] = [];
  const title = draft.title.trim();
  const abstract = draft.abstract.trim();
  if (title.length < TITLE_CHARS.min || title.length > TITLE_CHARS.max) problems.push(`the title has ${title.length} characters (${TITLE_CHARS.min}–${TITLE_CHARS.max} expected)`);
  if (abstract.length < ABSTRACT_CHARS.min || abstract.length > ABSTRACT_CHARS.max) problems.push(`the abstract has ${abstract.length} characters (${ABSTRACT_CHARS.min}–${ABSTRACT_CHARS.max} expected)`);
  return problems.length > 0
    ? { item_id: 'title_abstract_quality', status: 'fail', note: problems.join('; ') }
    : { item_id: 'title_abstract_quality', status: 'pass', note: `title ${title.length} and abstract ${abstract.length} characters, within bounds` };
}

function judgeClaims(draft: DraftUnderReview, found: Map<string, string>): ChecklistJudgement {
  const known = new Set(draft.results.map((result) => formatNumber(result.value)));
  const claimed = ['Abstract', 'Results', 'Decision'].flatMap((name) => claimedNumbers(found.get(name) ?? ''));
  const untraced = [...new Set(claimed.filter((number) => !known.has(formatNumber(Number(number)))))];
  if (untraced.length > 0) {
    return {
      item_id: 'claim_evidence_alignment',
      status: 'fail',
      note: `numbers not found in any results file: ${untraced.slice(0, 10).join(', ')}${untraced.length > 10 ? ', …' : ''}`,
    };
  }
  return { item_id: 'claim_evidence_alignment', status: 'pass', note: `all ${claimed.length} numbers in the abstract, results and decision trace to a results file` };
}

function judgeSection(itemId: ChecklistItemId, heading: string, found: Map<string, string>): ChecklistJudgement {
  return (found.get(heading) ?? '').trim() === ''
    ? { item_id: itemId, status: 'fail', note: `the ${heading} section is missing or empty` }
    : { item_id: itemId, status: 'pass', note: `the ${heading} section is present` };
}

/** The draft's text outside code spans and fenced code: where Markdown is markup. */
const outsideCode = (markdown: string) => markdown.replace(/^```[^\n]*\n[\s\S]*?^```[^\n]*$/gm, ' ').replace(/`[^`\n]*`/g, ' ');

/** Raw HTML (a tag, a comment, a processing instruction) and links to a script or data scheme: a draft is plain Markdown. */
function markupProblems(markdown: string): string[] {
  const text = outsideCode(markdown);
  const problems: string[] = [];
  const tag = /<\/?[A-Za-z][^>\n]*>?|<!--|<\?|<!\[?[A-Za-z]/.exec(text);
  if (tag) problems.push(`raw HTML (${JSON.stringify(tag[0].slice(0, 40))})`);
  // A scheme counts where Markdown makes a link of it (an inline target, an autolink, a reference definition), not in
  // prose: "Training data: 10k rows" is an honest sentence.
  const scheme = /(?:\]\(\s*<?|<|^[ \t]*\[[^\]\n]*\]:[ \t]*<?)(?:javascript|vbscript|data|file):/im.exec(text);
  if (scheme) problems.push(`a link scheme that is not allowed (${JSON.stringify(scheme[0])})`);
  return problems;
}

function judgeFormatting(markdown: string, found: Map<string, string>): ChecklistJudgement {
  const titles = markdown.split('\n').filter((line) => /^# /.test(line)).length;
  const order = [...found.keys()].filter((heading) => (DRAFT_SECTIONS as readonly string[]).includes(heading));
  const extra = [...found.keys()].filter((heading) => !(DRAFT_SECTIONS as readonly string[]).includes(heading));
  const problems: string[] = [];
  if (titles !== 1) problems.push(`${titles} top-level titles (one expected)`);
  if (extra.length > 0) problems.push(`sections that are not the paper's: ${extra.map((heading) => JSON.stringify(heading.slice(0, 60))).join(', ')}`);
  problems.push(...markupProblems(markdown));
  const missing = DRAFT_SECTIONS.filter((heading) => !found.has(heading));
  if (missing.length > 0) problems.push(`missing sections: ${missing.join(', ')}`);
  else if (order.join() !== DRAFT_SECTIONS.join()) problems.push(`sections out of order: ${order.join(', ')}`);
  return problems.length > 0
    ? { item_id: 'formatting_quality', status: 'fail', note: problems.join('; ') }
    : { item_id: 'formatting_quality', status: 'pass', note: `one title and the sections ${DRAFT_SECTIONS.join(', ')} in order` };
}

export function judgeDraft(draft: DraftUnderReview): ChecklistJudgement[] {
  const readable = judgeReadability(draft);
  const human = HUMAN_CHECKLIST_ITEM_IDS.map((item_id): ChecklistJudgement => ({ item_id, status: 'pending', note: 'for a person to judge' }));
  if (draft.markdown === null || readable.status === 'fail') {
    const unjudged = (['title_abstract_quality', 'claim_evidence_alignment', 'reproducibility', 'limitations_ethics', 'formatting_quality'] as const).map(
      (item_id): ChecklistJudgement => ({ item_id, status: 'pending', note: 'not judged: the draft could not be read' }),
    );
    return [readable, ...unjudged, ...human];
  }
  const found = sections(draft.markdown);
  return [
    readable,
    judgeTitleAbstract(draft),
    judgeClaims(draft, found),
    judgeSection('reproducibility', 'Reproducibility', found),
    judgeSection('limitations_ethics', 'Limitations', found),
    judgeFormatting(draft.markdown, found),
    ...human,
  ];
}

/** Whether the automated items let the paper go on: none failed. */
export function automatedChecklistPassed(judgements: readonly ChecklistJudgement[]): boolean {
  return judgements.every((judgement) => judgement.status !== 'fail');
}
