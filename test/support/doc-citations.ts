import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

/**
 * Citations of the documentation, and the headings they name. Code, scripts, config files and the OpenAPI
 * descriptions cite a page as `docs/<page>.md#<anchor>` (or `README.md#<anchor>`), from the repository's root; the
 * pages link each other with relative markdown links. Anchors are GitHub's heading slugs.
 */

/** GitHub's slug of a heading: lower case, punctuation dropped (letters, digits, `_`, `-` and spaces kept), spaces to `-`. */
export function headingSlug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}_\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The headings of a markdown text outside fenced code blocks. */
export function headingsOf(markdown: string): string[] {
  const headings: string[] = [];
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced) {
      const match = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
      if (match) headings.push(match[1]!);
    }
  }
  return headings;
}

/** Every anchor GitHub gives a markdown text's headings: a repeated slug gets `-1`, `-2`, … */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const heading of headingsOf(markdown)) {
    const slug = headingSlug(heading);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

export interface Citation {
  /** Where it was found: a file and line, or a place in the OpenAPI document. */
  where: string;
  /** What it names, as written. */
  text: string;
  /** The file it names, relative to the repository's root. */
  file: string;
  anchor: string | null;
}

const ROOT_CITATION = /(?<![\w./-])((?:docs\/[\w-]+|README)\.md)(?:#([\w-]+))?/g;
const MARKDOWN_LINK = /\]\(([^)\s]+)\)/g;
// The old form: the word README, then a quoted heading (a comment's line break may fall before the heading).
const BARE_README = /README(?:'s)?(?:\s|\*|\/\/|#|--)*\(?\\?"([^"\\\n]+(?:\n[\s*/#-]*[^"\\\n]+)?)\\?"/g;

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i += 1) if (text.charCodeAt(i) === 10) line += 1;
  return line;
}

/** The citations of one text; `file` is its path from the root (markdown links resolve against its folder). */
export function citationsIn(text: string, file: string): Citation[] {
  const citations: Citation[] = [];
  for (const match of text.matchAll(ROOT_CITATION)) {
    citations.push({ where: `${file}:${lineOf(text, match.index)}`, text: match[0], file: match[1]!, anchor: match[2] ?? null });
  }
  if (file.endsWith('.md')) {
    for (const match of text.matchAll(MARKDOWN_LINK)) {
      const target = match[1]!;
      if (/^[a-z][a-z+.-]*:/i.test(target)) continue;
      const [path, anchor] = target.split('#', 2) as [string, string | undefined];
      const resolved = path === '' ? file : normalize(join(dirname(file), path));
      citations.push({ where: `${file}:${lineOf(text, match.index)}`, text: target, file: resolved, anchor: anchor ?? null });
    }
  }
  return citations;
}

/** Citations in the old form (README and a quoted heading), with the heading each names. */
export function bareReadmeCitations(text: string, where: string): { where: string; heading: string }[] {
  return [...text.matchAll(BARE_README)].map((match) => ({
    where: `${where}:${lineOf(text, match.index)}`,
    heading: match[1]!.replace(/\s*\n[\s*/#-]*/g, ' '),
  }));
}

/** Reads the files cited and answers each citation whose file or anchor does not exist. */
export function brokenCitations(citations: Citation[], root: string): string[] {
  const anchors = new Map<string, Set<string> | null>();
  const anchorsIn = (file: string): Set<string> | null => {
    if (!anchors.has(file)) {
      const path = join(root, file);
      anchors.set(file, existsSync(path) ? (file.endsWith('.md') ? anchorsOf(readFileSync(path, 'utf8')) : new Set()) : null);
    }
    return anchors.get(file)!;
  };
  const broken: string[] = [];
  for (const citation of citations) {
    if (relative(root, join(root, citation.file)).startsWith('..')) {
      broken.push(`${citation.where}: ${citation.text} points outside the repository`);
      continue;
    }
    const found = anchorsIn(citation.file);
    if (found === null) broken.push(`${citation.where}: ${citation.text}: ${citation.file} does not exist`);
    else if (citation.anchor !== null && !found.has(citation.anchor)) {
      broken.push(`${citation.where}: ${citation.text}: ${citation.file} has no heading #${citation.anchor}`);
    }
  }
  return broken;
}
