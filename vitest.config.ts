import { defineConfig } from 'vitest/config';
import LongestFilesFirst from './test/support/sequencer.ts';

/**
 * Most test files spend their time waiting on real processes (quiet windows, restarts, timeouts), not on the CPU, so
 * they run several at a time even on two cores (docs/testing.md#tests). RCP_TEST_WORKERS overrides how many.
 */
const workers = Number(process.env.RCP_TEST_WORKERS ?? 4);

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: workers,
    sequence: { sequencer: LongestFilesFirst },
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    // A page or process under the load of the files beside it can take seconds to show what a poll waits for.
    expect: { poll: { timeout: 10_000 } },
    hookTimeout: 60_000,
    reporters: ['default'],
    // The processes the tests start check every answer against its response schema (docs/http.md#http-conventions).
    env: { RCP_CHECK_ANSWERS: '1' },
    // A missing service must fail the run loudly, never skip it.
    passWithNoTests: false,
  },
});
