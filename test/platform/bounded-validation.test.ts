import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { testPort } from '../support/ports.ts';
/** docs/http.md#http-conventions: at most this many entries, then one that counts the rest. */
const MAX_VALIDATION_PROBLEMS = 20;

// Issue 32, M5: every unknown key used to be its own 422 entry, so a body of thousands of keys got an answer many
// times its size. Both roles share the bound, so the attack runs against the control plane and the gate's event hook.
let t: TestApp;
let url: string;

beforeAll(async () => {
  t = await startTestApp({}, { workerGate: true, logLevel: 'warn' });
  const port = await testPort();
  await t.app.listen({ host: '127.0.0.1', port });
  url = `http://127.0.0.1:${port}`;
});
afterAll(async () => t?.close());

/** A JSON object of `count` unknown keys, each `width` characters long, next to `base`. */
function withUnknownKeys(base: Record<string, unknown>, count: number, width = 40): string {
  const extra = Object.fromEntries(Array.from({ length: count }, (_, index) => [`k${String(index).padStart(width - 1, '0')}`, 1]));
  return JSON.stringify({ ...base, ...extra });
}

async function post(path: string, body: string): Promise<{ status: number; text: string }> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
    body,
  });
  return { status: response.status, text: await response.text() };
}

/** The entries of a bounded 422: the first MAX_VALIDATION_PROBLEMS, then the summary, all in a few KiB. */
function expectBounded(answer: { status: number; text: string }) {
  expect(answer.status).toBe(422);
  expect(answer.text.length).toBeLessThan(8_000);
  const detail = (JSON.parse(answer.text) as { detail: { loc: unknown[]; msg: string; type: string }[] }).detail;
  expect(detail).toHaveLength(MAX_VALIDATION_PROBLEMS + 1);
  expect(detail.at(-1)).toMatchObject({ loc: ['body'], type: 'too_many_problems' });
  return detail;
}

describe('422 answers to bodies full of unknown keys (issue 32, M5)', () => {
  it('answers 20 entries and one summary to a 1 MB agent event of 20,000 unknown keys on the gate', { timeout: 60_000 }, async () => {
    const body = withUnknownKeys({ event: 'session-start', run_id: 'nobody-run' }, 20_000);
    expect(body.length).toBeGreaterThan(900_000);
    const detail = expectBounded(await post('/legacy-agent/event', body));
    expect(detail.slice(0, MAX_VALIDATION_PROBLEMS).every((entry) => entry.type === 'unrecognized_keys')).toBe(true);
    expect(detail.at(-1)!.msg).toBe(`${20_000 - MAX_VALIDATION_PROBLEMS} more problems not listed`);
  });

  it('answers a control-plane command of 20,000 unknown keys with as few entries, and a long key name shortened', { timeout: 60_000 }, async () => {
    expectBounded(await post('/svc-core/snapshots/workflow-queue', withUnknownKeys({}, 20_000)));
    const long = await post('/control/api/research/import-candidates', JSON.stringify({ ['x'.repeat(500_000)]: 1 }));
    expect(long.status).toBe(422);
    expect(long.text.length).toBeLessThan(4_000);
  });
});
