import { readFileSync } from 'node:fs';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Test files run several at a time (vitest.config.ts), so the suite takes about as long as its longest files, provided
 * they start first. A file that waits out quiet windows, restarts or timeouts says so in a line of its own,
 * `// expected duration: ~N s` (docs/testing.md#tests); those go first, longest first, then the rest, larger files first.
 */
const EXPECTED_DURATION = /^\/\/ expected duration: ~(\d+) s$/m;

function weight(spec: TestSpecification): [number, number] {
  const text = readFileSync(spec.moduleId, 'utf8');
  return [Number(EXPECTED_DURATION.exec(text)?.[1] ?? 0), text.length];
}

export default class LongestFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const weights = new Map(files.map((file) => [file, weight(file)] as const));
    return [...files].sort((a, b) => {
      const [secondsA, sizeA] = weights.get(a)!;
      const [secondsB, sizeB] = weights.get(b)!;
      return secondsB - secondsA || sizeB - sizeA;
    });
  }
}
