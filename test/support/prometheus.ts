import { CONTROL_TOKEN } from './gate.ts';

/** One sample of a Prometheus text exposition. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,\s*|$)/y;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/**
 * Parses the text exposition format strictly: every line must be a HELP or TYPE comment, a sample, or blank, each
 * family declares its TYPE once, and a sample's value is a number. Throws naming the first bad line.
 */
export function parseExposition(text: string): PromSample[] {
  const samples: PromSample[] = [];
  const typed = new Set<string>();
  for (const [index, line] of text.split('\n').entries()) {
    const where = `line ${index + 1}: ${line}`;
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const [, keyword, name, rest] = /^#\s+(\S+)\s+(\S+)\s*(.*)$/.exec(line) ?? [];
      if (keyword === 'TYPE') {
        if (!METRIC_NAME.test(name ?? '') || !TYPES.has(rest ?? '')) throw new Error(`bad TYPE, ${where}`);
        if (typed.has(name!)) throw new Error(`TYPE declared twice, ${where}`);
        typed.add(name!);
      } else if (keyword === 'HELP') {
        if (!METRIC_NAME.test(name ?? '')) throw new Error(`bad HELP, ${where}`);
      }
      continue;
    }
    const match = SAMPLE_LINE.exec(line);
    if (!match) throw new Error(`not a sample, ${where}`);
    const labels: Record<string, string> = {};
    const body = match[3] ?? '';
    LABEL.lastIndex = 0;
    while (LABEL.lastIndex < body.length) {
      const start = LABEL.lastIndex;
      const label = LABEL.exec(body);
      if (!label || label.index !== start) throw new Error(`bad labels, ${where}`);
      labels[label[1]!] = label[2]!;
    }
    // Values are Go floats, whose parser takes NaN and Inf in any case (prom-client writes "Nan").
    const raw = match[4]!.toLowerCase();
    const value = raw === '+inf' || raw === 'inf' ? Infinity : raw === '-inf' ? -Infinity : raw === 'nan' ? NaN : Number(raw);
    if (Number.isNaN(value) && raw !== 'nan') throw new Error(`bad value, ${where}`);
    samples.push({ name: match[1]!, labels, value });
  }
  return samples;
}

/** The value of the one sample named `name` whose labels include `labels`; undefined when there is none. */
export function sampleValue(samples: PromSample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

/** Scrapes `<url>/metrics` with a bearer token and parses the answer. */
export async function scrape(url: string, token = CONTROL_TOKEN): Promise<PromSample[]> {
  return parseExposition(await scrapeText(url, token));
}

/** Scrapes `<url>/metrics` with a bearer token: the exposition as it was sent. */
export async function scrapeText(url: string, token = CONTROL_TOKEN): Promise<string> {
  const response = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  if (response.status !== 200) throw new Error(`GET /metrics answered ${response.status}`);
  if (!response.headers.get('content-type')?.startsWith('text/plain')) throw new Error(`GET /metrics content-type ${response.headers.get('content-type')}`);
  return response.text();
}
