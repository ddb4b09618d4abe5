import { readFileSync } from 'node:fs';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Test files run several at a time (vitest.config.ts), so the suite takes about as long as its longest files, provided
 * they start first. A file that waits out quiet windows, restarts or timeouts says so in a line of its own,
 * `// expected duration: ~N s` (docs/testing.md#tests); those go first, longest first, then the rest, larger files first.
 *
 * Files that start real agent tools (Codex, Claude Code: each a large Node program, several at once per file) are
 * spread out: after each, as many other files as there are other workers, so two of them rarely run side by side.
 * Side by side on two cores, they starved one another of CPU long enough to pass the tools' own time limits.
 */
const EXPECTED_DURATION = /^\/\/ expected duration: ~(\d+) s$/m;
const STARTS_REAL_AGENTS = /\b(pinnedAgentBinary|startAgentGate)\(/;

interface Weighed {
  spec: TestSpecification;
  seconds: number;
  size: number;
  realAgents: boolean;
}

function weigh(spec: TestSpecification): Weighed {
  const text = readFileSync(spec.moduleId, 'utf8');
  return { spec, seconds: Number(EXPECTED_DURATION.exec(text)?.[1] ?? 0), size: text.length, realAgents: STARTS_REAL_AGENTS.test(text) };
}

/** `ordered`, with each real-agent file followed by `gap` other files before the next one, as far as others last. */
export function spreadRealAgents<T extends { realAgents: boolean }>(ordered: readonly T[], gap: number): T[] {
  const heavy = ordered.filter((file) => file.realAgents);
  const light = ordered.filter((file) => !file.realAgents);
  const spread: T[] = [];
  while (heavy.length > 0 || light.length > 0) {
    const next = heavy.shift();
    if (next) spread.push(next);
    spread.push(...light.splice(0, gap));
  }
  return spread;
}

export default class LongestFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = files.map(weigh).sort((a, b) => b.seconds - a.seconds || b.size - a.size);
    const workers = Math.max(1, Number(this.ctx.config.maxWorkers) || 1);
    return spreadRealAgents(ordered, Math.max(1, workers - 1)).map((file) => file.spec);
  }
}
