import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CALLBACK_TOKEN, CONTROL_TOKEN, GATE_TOKEN, waitUntil } from '../support/gate.ts';
import { candidate } from '../support/research.ts';
import { RUN_STACK_START_MS, gateTarget, startRunStack, type RunStack } from '../support/run-stack.ts';

/**
 * The operational trace with real processes: a control plane and a worker gate, both tracing, and every secret either
 * knows sent through them in headers, cookies and bodies. The trace must hold the payloads, cut at the limit, and none
 * of the secrets.
 */

const MAX_PAYLOAD = 2048;
const SPARE_TARGET_TOKEN = 'spare-target-token-5a6b7c8d9e0f1a2b';
const PAPER_KEY = 'paper-writer-env-key-3c4d5e6f7a8b';
const RESEARCH_KEY = 'research-provider-env-key-9a8b7c6d';
const PROMPT_SECRET = 'PROMPT-TEXT-MUST-NOT-BE-TRACED-1234';

let stack: RunStack;
const savedEnv = { PAPER_WRITER_API_KEY: process.env.PAPER_WRITER_API_KEY, RESEARCH_PROVIDER_API_KEY: process.env.RESEARCH_PROVIDER_API_KEY };

beforeAll(async () => {
  // The processes inherit this environment: the keys they read from it are secrets the trace must know.
  process.env.PAPER_WRITER_API_KEY = PAPER_KEY;
  process.env.RESEARCH_PROVIDER_API_KEY = RESEARCH_KEY;
  stack = await startRunStack({
    gateOverrides: { operational_trace_enabled: true, operational_trace_max_payload_bytes: MAX_PAYLOAD, operational_trace_log_path: './trace/gate.jsonl' },
    controlPlaneOverrides: (gateFixture) => ({
      operational_trace_enabled: true,
      operational_trace_max_payload_bytes: MAX_PAYLOAD,
      worker_targets: {
        gpu: gateTarget(gateFixture),
        spare: { wake_gate_url: 'http://127.0.0.1:9', bearer_token: SPARE_TARGET_TOKEN, role: 'cpu_worker' },
      },
    }),
  });
}, RUN_STACK_START_MS);

afterAll(async () => {
  for (const [name, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  await stack?.close();
});

interface TraceLine {
  direction: 'inbound' | 'outbound';
  route?: string;
  target?: string;
  path?: string;
  method: string;
  status: number | null;
  duration_ms: number;
  request_headers?: Record<string, string>;
  request: { bytes: number; truncated: boolean; text: string | null };
  response: { bytes: number; truncated: boolean; text: string | null };
}

/** The trace's complete lines: a process appending a long line may have written only part of it when the file is read. */
const readTrace = async (path: string) => {
  const read = await readFile(path, 'utf8').catch(() => '');
  const text = read.slice(0, read.lastIndexOf('\n') + 1);
  return { text, lines: text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as TraceLine) };
};

/** Every prompt_text in a payload, wherever it is nested. */
function promptTexts(value: unknown): unknown[] {
  if (Array.isArray(value)) return value.flatMap(promptTexts);
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, inner]) => (key === 'prompt_text' ? [inner] : promptTexts(inner)));
}

describe('operational trace', () => {
  it('captures command payloads in and out, cut at the limit, with every secret redacted', { timeout: 120_000 }, async () => {
    const cpTrace = join(stack.cpFixture.dir, 'state', 'operational-trace.jsonl');
    const gateTrace = join(stack.gateFixture.dir, 'trace', 'gate.jsonl');
    const url = stack.cpFixture.url;

    // A dashboard session: its cookie and CSRF token are secrets the trace learns as they are issued.
    const login = await fetch(`${url}/control/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: CONTROL_TOKEN }) });
    expect(login.status).toBe(200);
    const sessionCookie = /cp_session=([^;]+)/.exec(login.headers.get('set-cookie') ?? '')?.[1];
    const { csrf_token: csrf } = (await login.json()) as { csrf_token: string };
    expect(sessionCookie).toBeTruthy();

    // A command through the session, whose body carries every secret as a plain value, plus a prompt.
    const everySecret = [CONTROL_TOKEN, CALLBACK_TOKEN, GATE_TOKEN, SPARE_TARGET_TOKEN, PAPER_KEY, RESEARCH_KEY, sessionCookie!, csrf];
    const pause = await fetch(`${url}/control/pause`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: `cp_session=${sessionCookie}`, 'x-csrf-token': csrf },
      body: JSON.stringify({ paused_by: 'trace-test', note: everySecret.join(' and '), prompt_text: PROMPT_SECRET }),
    });
    expect(pause.status).toBeGreaterThanOrEqual(200);

    // A large body: cut at the limit.
    const large = await stack.api('POST', '/control/api/research/import-candidates', {
      candidates: [candidate({ dedupe_key: 'trace-large', title: 'Trace large body', hypothesis: 'x'.repeat(5000) })],
      requested_by: 'trace-test',
      dry_run: true,
    });
    // Whatever the answer (the hypothesis is over its length limit), the request was a command and is traced.
    expect(large.status).toBeGreaterThanOrEqual(200);

    // A live dispatch: the control plane calls the gate (prepare with the prompt, then dispatch).
    const imported = await stack.api('POST', '/control/api/research/import-candidates', { candidates: [candidate({ dedupe_key: 'trace-run' })], requested_by: 'trace-test', dry_run: false });
    const promoted = await stack.api('POST', '/control/api/research/promote-candidate', {
      candidate_id: imported.body.results[0].candidate_id,
      dry_run: false,
      requested_by: 'trace-test',
      idempotency_key: 'promote-trace-run',
    });
    expect(promoted.status).toBe(200);
    const projectDir = join(stack.gateFixture.projectRoot, promoted.body.queue_item.project_id);
    await mkdir(projectDir, { recursive: true });
    await writeFile(join(projectDir, 'scenario.json'), JSON.stringify({ scenario: 'normal' }));
    const live = await stack.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'trace-test' });
    expect(live.status).toBe(200);
    expect(live.body).toMatchObject({ prepare: { ok: true }, dispatch: { ok: true } });
    stack.agents.remember(live.body);

    const cp = await waitUntil(
      'the control plane trace to hold the dispatch',
      async () => {
        const trace = await readTrace(cpTrace);
        return trace.lines.some((l) => l.route === '/control/dispatch-next') ? trace : undefined;
      },
      10_000,
    );
    const gate = await waitUntil('the gate trace to hold the dispatch', async () => {
      const trace = await readTrace(gateTrace);
      return trace.lines.some((l) => l.route === '/dispatch') ? trace : undefined;
    }, 10_000);

    // Payloads are there.
    const pauseLine = cp.lines.find((l) => l.route === '/control/pause')!;
    expect(pauseLine).toMatchObject({ direction: 'inbound', method: 'POST', status: pause.status });
    expect(pauseLine.request.text).toContain('"paused_by":"trace-test"');
    expect(pauseLine.response.text).toBeTruthy();
    expect(pauseLine.request_headers).toEqual(expect.objectContaining({ 'content-type': 'application/json' }));
    expect(pauseLine.request_headers).not.toHaveProperty('cookie');
    expect(pauseLine.request_headers).not.toHaveProperty('x-csrf-token');
    expect(JSON.parse(cp.lines.find((l) => l.route === '/control/api/session')!.response.text!)).toMatchObject({ csrf_token: '[redacted]' });
    const prepare = cp.lines.find((l) => l.direction === 'outbound' && l.path === '/prepare-project')!;
    expect(prepare).toMatchObject({ target: 'default', method: 'POST', status: 200 });
    expect(JSON.parse(prepare.request.text!)).toMatchObject({ project_id: promoted.body.queue_item.project_id, prompt_text: '[redacted]' });
    expect(cp.lines.some((l) => l.direction === 'outbound' && l.path === '/dispatch' && l.status === 200)).toBe(true);
    const gatePrepare = gate.lines.find((l) => l.route === '/prepare-project')!;
    expect(gatePrepare).toMatchObject({ direction: 'inbound', status: 200 });
    expect(JSON.parse(gatePrepare.request.text!)).toMatchObject({ prompt_file: expect.any(String), prompt_text: '[redacted]' });
    // GET requests are not commands.
    expect([...cp.lines, ...gate.lines].filter((l) => l.direction === 'inbound' && l.method === 'GET')).toEqual([]);

    // The large body is cut at the limit, and says so.
    const largeLine = cp.lines.find((l) => l.route === '/control/api/research/import-candidates' && l.request.truncated)!;
    expect(largeLine.request.bytes).toBeGreaterThan(MAX_PAYLOAD);
    expect(Buffer.byteLength(largeLine.request.text!)).toBeLessThanOrEqual(MAX_PAYLOAD);
    expect(largeLine.request.text).toContain('Trace large body');

    // Every prompt is redacted, and no secret is anywhere in either file.
    for (const line of [...cp.lines, ...gate.lines]) {
      for (const payload of [line.request, line.response]) {
        if (payload.text && !payload.truncated) for (const prompt of promptTexts(JSON.parse(payload.text))) expect(prompt).toBe('[redacted]');
      }
    }
    for (const text of [cp.text, gate.text]) {
      for (const secret of [...everySecret, PROMPT_SECRET]) expect(text).not.toContain(secret);
    }
    expect(pauseLine.request.text).toContain('[redacted] and [redacted]');

    // Only its owner may read it.
    expect((await stat(cpTrace)).mode & 0o777).toBe(0o600);
    expect((await stat(gateTrace)).mode & 0o777).toBe(0o600);
  });

  it('is announced truthfully at start-up, and no key reaches the output', () => {
    const output = stack.cp.output();
    const announce = output.split('\n').filter((line) => line.includes('operational_trace_enabled: '));
    expect(announce).toHaveLength(1);
    expect(announce[0]).toContain(join(stack.cpFixture.dir, 'state', 'operational-trace.jsonl'));
    expect(announce[0]).toContain(`up to ${MAX_PAYLOAD} bytes`);
    expect(announce[0]).toContain('prompt_text redacted');
    expect(output).not.toContain(PAPER_KEY);
    expect(output).not.toContain(RESEARCH_KEY);
  });
});
