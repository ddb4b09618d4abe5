import { Tokenizer, TokenType } from '@streamparser/json';
import { EVIDENCE_CAPS } from '../../worker-gate/contract/evidence-caps.ts';

/** A results file that is not one JSON document, or nests deeper than the cap: it is not evidence. */
export class NotResultsJson extends Error {}

interface Frame {
  kind: 'object' | 'array';
  kept: Map<string, unknown> | unknown[];
  /** The key whose value comes next (objects). */
  key: string | null;
}

/** What the grammar takes next. */
type Expect = 'value' | 'value_or_close' | 'key' | 'key_or_close' | 'colon' | 'comma_or_close' | 'end';

/**
 * The numbers of a results file, its shape kept (objects by key, keys sorted; arrays by index, null where an item holds
 * no number), at most `budget.left` of them in the order the file holds them; undefined when it holds none.
 *
 * The file is tokenized (@streamparser/json, a maintained streaming tokenizer) rather than parsed with JSON.parse: a
 * 5 MiB object of 440,000 keys becomes about 80 MiB of heap when parsed whole, six of them at once several hundred,
 * while a token stream leaves only the numbers kept and the path to them. The grammar is checked here, since the
 * tokenizer checks only tokens. Throws NotResultsJson for anything that is not one JSON document.
 */
export function resultNumbers(bytes: Buffer, budget: { left: number }): unknown {
  const stack: Frame[] = [];
  let expect: Expect = 'value';
  let top: unknown;

  const settled = (value: unknown) => {
    const frame = stack.at(-1);
    if (!frame) {
      top = value;
      expect = 'end';
      return;
    }
    if (frame.kind === 'array') {
      const items = frame.kept as unknown[];
      if (value !== undefined || budget.left > 0) items.push(value ?? null);
    } else if (value !== undefined) {
      (frame.kept as Map<string, unknown>).set(frame.key!, value);
    }
    expect = 'comma_or_close';
  };
  const close = (kind: Frame['kind']) => {
    const frame = stack.pop();
    if (!frame || frame.kind !== kind) throw new NotResultsJson('unbalanced brackets');
    if (frame.kind === 'array') {
      const items = frame.kept as unknown[];
      settled(items.some((item) => item !== null) ? items : undefined);
    } else {
      const kept = frame.kept as Map<string, unknown>;
      settled(kept.size > 0 ? Object.fromEntries([...kept].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : undefined);
    }
  };
  const open = (kind: Frame['kind']) => {
    if (stack.length >= EVIDENCE_CAPS.maxResultDepth) throw new NotResultsJson(`nested deeper than ${EVIDENCE_CAPS.maxResultDepth} levels`);
    stack.push({ kind, kept: kind === 'array' ? [] : new Map(), key: null });
    expect = kind === 'array' ? 'value_or_close' : 'key_or_close';
  };

  const tokenizer = new Tokenizer();
  tokenizer.onError = (error) => {
    throw new NotResultsJson(error.message);
  };
  tokenizer.onToken = ({ token, value }) => {
    const takesValue = expect === 'value' || expect === 'value_or_close';
    switch (token) {
      case TokenType.LEFT_BRACE:
      case TokenType.LEFT_BRACKET:
        if (!takesValue) break;
        open(token === TokenType.LEFT_BRACE ? 'object' : 'array');
        return;
      case TokenType.RIGHT_BRACE:
        if (expect !== 'key_or_close' && expect !== 'comma_or_close') break;
        close('object');
        return;
      case TokenType.RIGHT_BRACKET:
        if (expect !== 'value_or_close' && expect !== 'comma_or_close') break;
        close('array');
        return;
      case TokenType.COLON:
        if (expect !== 'colon') break;
        expect = 'value';
        return;
      case TokenType.COMMA:
        if (expect !== 'comma_or_close') break;
        expect = stack.at(-1)!.kind === 'array' ? 'value' : 'key';
        return;
      case TokenType.STRING:
        if (expect === 'key' || expect === 'key_or_close') {
          stack.at(-1)!.key = value as string;
          expect = 'colon';
          return;
        }
        if (!takesValue) break;
        settled(undefined);
        return;
      case TokenType.NUMBER: {
        if (!takesValue) break;
        const number = value as number;
        if (budget.left > 0 && Number.isFinite(number)) {
          budget.left -= 1;
          settled(number);
        } else settled(undefined);
        return;
      }
      case TokenType.TRUE:
      case TokenType.FALSE:
      case TokenType.NULL:
        if (!takesValue) break;
        settled(undefined);
        return;
    }
    throw new NotResultsJson(`unexpected ${TokenType[token]}`);
  };
  tokenizer.write(bytes);
  tokenizer.end();
  if ((expect as Expect) !== 'end') throw new NotResultsJson('the document ends early');
  return top;
}
