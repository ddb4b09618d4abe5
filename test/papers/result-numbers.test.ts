import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EVIDENCE_CAPS } from '../../worker-gate/contract/evidence-caps.ts';
import { NotResultsJson, resultNumbers } from '../../capabilities/papers/result-numbers.ts';

/** What the evidence reader kept before it streamed: the numbers of the whole parsed document, keys sorted. */
function numbersOfParsed(node: unknown): unknown {
  if (typeof node === 'number') return Number.isFinite(node) ? node : undefined;
  if (Array.isArray(node)) {
    const kept = node.map((item) => numbersOfParsed(item) ?? null);
    return kept.some((item) => item !== null) ? kept : undefined;
  }
  if (node !== null && typeof node === 'object') {
    // Own properties, as JSON.parse makes them: a key named __proto__ is a key like any other.
    const kept = Object.keys(node)
      .sort()
      .map((key) => [key, numbersOfParsed((node as Record<string, unknown>)[key])] as const)
      .filter(([, value]) => value !== undefined);
    return kept.length > 0 ? Object.fromEntries(kept) : undefined;
  }
  return undefined;
}

const read = (text: string, left = 1_000_000) => resultNumbers(Buffer.from(text), { left });

describe('the numbers of a results file, read as tokens', () => {
  it('are what the whole parsed document holds, for any JSON document within the budget', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => {
        expect(read(JSON.stringify(value, null, 1))).toEqual(numbersOfParsed(JSON.parse(JSON.stringify(value))));
      }),
      { numRuns: 1_000 },
    );
  });

  it('keep at most the budget, in the order the file holds them, and spend it across files', () => {
    const budget = { left: 3 };
    expect(resultNumbers(Buffer.from('{"b": 1, "a": [2, "x", 3], "c": 4}'), budget)).toEqual({ a: [2, null, 3], b: 1 });
    expect(budget.left).toBe(0);
    expect(resultNumbers(Buffer.from('{"d": 5}'), budget)).toBeUndefined();
  });

  it('keep a key named __proto__ as a key, changing no prototype', () => {
    const kept = read('{"__proto__": {"polluted": 1}}') as Record<string, unknown>;
    expect(Object.keys(kept)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(kept)).toBe(Object.prototype);
  });

  it.each([
    ['not JSON', 'accuracy: 0.9'],
    ['two documents', '{} {}'],
    ['a missing colon', '{"a" 1}'],
    ['a trailing comma', '[1, 2,]'],
    ['a bare key', '{a: 1}'],
    ['unbalanced brackets', '{"a": [1}'],
    ['a cut-off document', '{"a": [1, 2'],
    ['nesting past the cap', `${'['.repeat(EVIDENCE_CAPS.maxResultDepth + 1)}${']'.repeat(EVIDENCE_CAPS.maxResultDepth + 1)}`],
  ])('refuse %s: it is not evidence', (_, text) => {
    expect(() => read(text)).toThrow(NotResultsJson);
  });
});
