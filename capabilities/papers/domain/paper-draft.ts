/**
 * The deterministic paper writer (docs/papers.md#papers): a complete paper in Markdown from a run's evidence alone. Pure:
 * the same evidence gives the same bytes (keys sorted, no clock, no randomness), so a redraft of unchanged evidence
 * changes nothing and the automated checklist can trace every number back to a results file.
 */

export interface DraftEvidence {
  project_id: string;
  project_name: string;
  run_id: string;
  /** When the run finished (ISO 8601), or null. */
  finished_at: string | null;
  decision: string | null;
  decision_summary: string | null;
  /** The text of run_notes.md. */
  run_notes: string;
  /** The parsed `results/**\/*.json` files, by path relative to the project. */
  results: readonly { path: string; data: unknown }[];
}

export interface ResultValue {
  /** The results file, relative to the project. */
  file: string;
  /** Where in the file: `metrics.accuracy`, `runs[0].loss`. */
  key: string;
  value: number;
}

export interface Draft {
  title: string;
  abstract: string;
  markdown: string;
}

/** The section headings every draft has, in order; the checklist checks them. */
export const DRAFT_SECTIONS = ['Abstract', 'Method', 'Results', 'Decision', 'Limitations', 'Reproducibility'] as const;

const MAX_RESULT_ROWS = 200;
const MAX_NOTES_CHARS = 20_000;

/** Every finite number in a results file, depth first, keys in sorted order. */
export function resultValues(results: DraftEvidence['results']): ResultValue[] {
  const values: ResultValue[] = [];
  const visit = (file: string, key: string, node: unknown) => {
    if (typeof node === 'number' && Number.isFinite(node)) values.push({ file, key, value: node });
    else if (Array.isArray(node)) node.forEach((item, index) => visit(file, `${key}[${index}]`, item));
    else if (node !== null && typeof node === 'object') {
      for (const name of Object.keys(node).sort()) visit(file, key ? `${key}.${name}` : name, (node as Record<string, unknown>)[name]);
    }
  };
  for (const { path, data } of [...results].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) visit(path, '', data);
  return values;
}

/** How a number is written in a draft; the checklist reads numbers back the same way. */
export function formatNumber(value: number): string {
  return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(6)));
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();

/**
 * A name the agent chose (a file, a key, an id) as a code span: on one line, without backticks (which would end the
 * span and let the rest be read as Markdown or raw HTML), without control characters, and with pipes escaped so a
 * table cell stays one cell. Inside a code span nothing else is markup.
 */
export const codeSpan = (text: string) =>
  `\`${oneLine(text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ')).replace(/`/g, "'").replace(/\|/g, '\\|') || ' '}\``;

/** Text from outside with `&`, `<` and brackets escaped, so that raw HTML or a link in it stays text in the Markdown. */
const asText = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/\[/g, '\\[').replace(/\]/g, '\\]');

/** The agent's own words, quoted: markup stays text, and each line starts with '>' so a heading never becomes a section. */
const quoteLine = (line: string) => (line ? `> ${asText(line)}` : '>');

function titleOf(evidence: DraftEvidence): string {
  const outcome = evidence.decision === 'finalize_positive' ? 'a positive result' : `decision ${evidence.decision ?? 'none'}`;
  return `${oneLine(evidence.project_name)}: ${outcome}`;
}

function abstractOf(evidence: DraftEvidence, values: ResultValue[]): string {
  const measured = values.length === 0 ? 'It recorded no numeric results.' : 'Its numeric results are tabulated under Results.';
  const summary = evidence.decision_summary ? " The agent's own summary is quoted under Decision." : '';
  return `This paper reports run ${codeSpan(evidence.run_id)} of project ${codeSpan(evidence.project_id)}, which ended with the decision ${codeSpan(evidence.decision ?? 'none')}. ${measured}${summary}`;
}

function resultsSection(values: ResultValue[]): string[] {
  if (values.length === 0) return ['No results file held a number.'];
  const shown = values.slice(0, MAX_RESULT_ROWS);
  const lines = ['| file | result | value |', '|---|---|---|'];
  // Names go in code spans: the checklist traces every number outside code spans back to a results file.
  for (const { file, key, value } of shown) lines.push(`| ${codeSpan(file)} | ${codeSpan(key || '(value)')} | ${formatNumber(value)} |`);
  if (values.length > shown.length) lines.push('', `Further results are in the files and not shown here (\`${values.length - shown.length}\` more).`);
  return lines;
}

export function deterministicDraft(evidence: DraftEvidence): Draft {
  const values = resultValues(evidence.results);
  const title = titleOf(evidence);
  const abstract = abstractOf(evidence, values);
  const notes = evidence.run_notes.trim().slice(0, MAX_NOTES_CHARS) || 'The run notes are empty.';
  const files = [...new Set(evidence.results.map((r) => r.path))].sort();
  const markdown = [
    // The title is the project's name, which a research provider or an import may have chosen.
    `# ${asText(title)}`,
    '',
    '## Abstract',
    '',
    abstract,
    '',
    '## Method',
    '',
    // The notes are the agent's words: quoted, so their headings cannot become sections of the paper.
    ...notes.split('\n').map(quoteLine),
    '',
    '## Results',
    '',
    ...resultsSection(values),
    '',
    '## Decision',
    '',
    `The agent's decision is ${codeSpan(evidence.decision ?? 'none')}.`,
    // The summary is the agent's words, quoted like the notes: its numbers are its claims, not the paper's.
    ...(evidence.decision_summary ? ['', quoteLine(oneLine(evidence.decision_summary))] : []),
    '',
    '## Limitations',
    '',
    'This draft was written from the run\'s evidence files alone: it states what the run measured, not why. One run is one sample; the results have not been repeated, and no baseline beyond what the notes name was measured.',
    '',
    '## Reproducibility',
    '',
    `Project ${codeSpan(evidence.project_id)}, run ${codeSpan(evidence.run_id)}${evidence.finished_at ? `, finished ${oneLine(evidence.finished_at)}` : ''}. Evidence: \`run_notes.md\`${files.map((file) => `, ${codeSpan(file)}`).join('')}.`,
    '',
  ].join('\n');
  return { title, abstract, markdown };
}
