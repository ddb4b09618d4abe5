import { createHash } from 'node:crypto';
import { appendFile, mkdir, mkdtemp, rm, truncate, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRANSCRIPT_CAPS, type TranscriptEntry, type TranscriptPush } from '../../worker-gate/contract/run-transcript.ts';
import type { GateRun } from '../../worker-gate/domain/gate-run.ts';
import { streamTranscriptReader } from '../../worker-gate/launchers/stream-transcript.ts';
import { RunTranscripts, transcriptUrlBeside } from '../../worker-gate/transcripts/run-transcripts.ts';
import { credentialValues, secretRedactor } from '../../worker-gate/transcripts/secret-redactor.ts';
import { startLoopbackServer } from '../support/receiver.ts';
import { waitUntil } from '../support/gate.ts';

/**
 * The gate's side of a run's transcript (docs/runs.md#following-a-run-live): the tools' streams read into entries, the
 * secrets stripped, the bounds kept, and the push to a real HTTP receiver standing in for the control plane, across its
 * refusals and a restart of the gate.
 */

const json = (value: unknown) => JSON.stringify(value);

describe("a real tool's stream, read into entries", () => {
  it("takes Codex CLI's --json items: messages, commands with their exit code and output, file changes, errors", () => {
    const reader = streamTranscriptReader('codex');
    const read = (line: unknown) => reader.read(json(line));
    expect(read({ type: 'thread.started', thread_id: 't1' })).toEqual([]);
    expect(read({ type: 'item.started', item: { id: 'c1', type: 'command_execution', command: 'bash -lc ls', status: 'in_progress' } })).toEqual([
      { kind: 'tool_call', tool: 'command_execution', text: 'bash -lc ls' },
    ]);
    expect(read({ type: 'item.completed', item: { id: 'c1', type: 'command_execution', command: 'bash -lc ls', aggregated_output: 'a\nb\n', exit_code: 0 } })).toEqual([
      { kind: 'tool_output', tool: 'command_execution', text: 'exit 0\na\nb\n' },
    ]);
    expect(read({ type: 'item.completed', item: { type: 'agent_message', text: 'Done.' } })).toEqual([{ kind: 'message', tool: null, text: 'Done.' }]);
    expect(read({ type: 'item.completed', item: { type: 'reasoning', text: 'Look first.' } })).toEqual([{ kind: 'message', tool: null, text: 'thinking: Look first.' }]);
    expect(read({ type: 'item.completed', item: { type: 'file_change', changes: [{ path: 'a.py', kind: 'add' }, { path: 'b.py', kind: 'update' }] } })).toEqual([
      { kind: 'tool_call', tool: 'file_change', text: 'add a.py\nupdate b.py' },
    ]);
    expect(read({ type: 'turn.failed', error: { message: 'stream closed' } })).toEqual([{ kind: 'lifecycle', tool: null, text: 'turn failed: stream closed' }]);
    expect(reader.read('not json')).toEqual([]);
    expect(reader.read('')).toEqual([]);
  });

  it("takes Claude Code's stream-json messages: text, tool uses with their command, results named after their call", () => {
    const reader = streamTranscriptReader('claude-code');
    const read = (line: unknown) => reader.read(json(line));
    expect(read({ type: 'system', subtype: 'init', session_id: 's' })).toEqual([]);
    expect(
      read({ type: 'assistant', message: { content: [{ type: 'text', text: 'Running it.' }, { type: 'tool_use', id: 'tu1', name: 'Bash', input: { command: 'python x.py' } }] } }),
    ).toEqual([
      { kind: 'message', tool: null, text: 'Running it.' },
      { kind: 'tool_call', tool: 'Bash', text: 'python x.py' },
    ]);
    expect(read({ type: 'assistant', message: { content: [{ type: 'tool_use', id: 'tu2', name: 'Write', input: { file_path: 'a.md', content: 'x' } }] } })).toEqual([
      { kind: 'tool_call', tool: 'Write', text: '{"file_path":"a.md","content":"x"}' },
    ]);
    expect(read({ type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 'tu1', content: [{ type: 'text', text: 'ok' }] }] } })).toEqual([
      { kind: 'tool_output', tool: 'Bash', text: 'ok' },
    ]);
    expect(read({ type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 'unknown', content: 'denied', is_error: true }] } })).toEqual([
      { kind: 'tool_output', tool: null, text: 'error\ndenied' },
    ]);
    expect(read({ type: 'result', is_error: false, result: 'Done.' })).toEqual([]);
    expect(read({ type: 'result', is_error: true, result: 'API Error: 500' })).toEqual([{ kind: 'lifecycle', tool: null, text: 'error: API Error: 500' }]);
  });
});

describe("the gate's secrets", () => {
  it('are replaced: its tokens, the credential values it passes on, and a run event token known by its digest alone', () => {
    const eventToken = 'A'.repeat(21) + '_' + 'b'.repeat(21);
    const digest = createHash('sha256').update(eventToken).digest('hex');
    const redact = secretRedactor(['gate-token-0123456789', 'sk-model-key-abcdef', 'short', '']);
    expect(redact(`Bearer gate-token-0123456789 key=sk-model-key-abcdef token=${eventToken}; short stays`, digest)).toBe('Bearer [redacted] key=[redacted] token=[redacted]; short stays');
    // Another token of the same shape is not the run's.
    const other = 'C'.repeat(43);
    expect(redact(other, digest)).toBe(other);
    expect(credentialValues({ OPENAI_API_KEY: 'sk-1', OPENAI_BASE_URL: 'http://127.0.0.1:1/v1' }, ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'UNSET'])).toEqual(['sk-1']);
  });
});

describe('the push to the control plane', () => {
  let dir: string;
  let receiver: { origin: string; close: () => Promise<void> };
  let status = 200;
  const held = new Map<string, Map<number, TranscriptEntry>>();
  const heldOf = (runId: string) => [...(held.get(runId)?.values() ?? [])].sort((a, b) => a.seq - b.seq);
  const runs = new Map<string, GateRun>();
  /** The runs the stand-in control plane knows: another is answered 404. */
  const knownThere = new Set(['run-a', 'run-long', 'run-tail']);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rcp-gate-transcripts-'));
    receiver = await startLoopbackServer((request, response) => {
      if (status !== 200) return response.writeHead(status).end('{}');
      const push = JSON.parse(request.body) as TranscriptPush;
      if (!knownThere.has(push.run_id)) return response.writeHead(404).end('{}');
      const entries = held.get(push.run_id) ?? new Map<number, TranscriptEntry>();
      held.set(push.run_id, entries);
      for (const entry of push.entries) if (!entries.has(entry.seq)) entries.set(entry.seq, entry);
      response.writeHead(200, { 'content-type': 'application/json' }).end(json({ run_id: push.run_id, stored_through: Math.max(...entries.keys()) }));
    });
  });
  afterAll(async () => {
    await receiver?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const gateTranscripts = (origin = receiver.origin, journals = 'transcripts') =>
    new RunTranscripts({
      dir: join(dir, journals),
      urls: [transcriptUrlBeside(`${origin}/control/api/worker-callback`)],
      token: 'callback-token-0123456789',
      timeoutSec: 5,
      logger: pino({ level: 'silent' }),
      secrets: ['callback-token-0123456789'],
      runOf: (runId) => runs.get(runId),
      passIntervalMs: 50,
    });
  const going = { gate_state: 'running' } as GateRun;

  it('sends each entry once, in order, from where the control plane holds it, across its refusals and a restart of the gate', { timeout: 30_000 }, async () => {
    expect(transcriptUrlBeside('http://cp:8787/control/api/worker-callback')).toBe('http://cp:8787/control/api/worker-transcript');
    runs.set('run-a', going);
    let transcripts = gateTranscripts();
    transcripts.load();
    transcripts.start();
    transcripts.append('run-a', [{ kind: 'message', tool: null, text: 'first, with callback-token-0123456789 in it' }]);
    await waitUntil('the first entry', () => (heldOf('run-a').length === 1 ? true : undefined), 5_000, 20);
    expect(heldOf('run-a')[0]).toMatchObject({ seq: 1, kind: 'message', text: 'first, with [redacted] in it' });

    status = 503;
    transcripts.append('run-a', [{ kind: 'tool_call', tool: 'Bash', text: 'ls' }, { kind: 'tool_output', tool: 'Bash', text: 'x'.repeat(5000) }]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(transcripts.pendingCount()).toBe(2);
    // The gate stops with two entries unsent, and a new process takes them up from its journal.
    await transcripts.stop();
    status = 200;
    transcripts = gateTranscripts();
    transcripts.load();
    transcripts.start();
    transcripts.append('run-a', [{ kind: 'message', tool: null, text: 'after the restart' }]);
    await waitUntil('every entry', () => (heldOf('run-a').length === 4 ? true : undefined), 10_000, 20);
    const entries = heldOf('run-a');
    expect(entries.map((entry) => entry.seq)).toEqual([1, 2, 3, 4]);
    expect(entries[2]!.text).toBe(`${'x'.repeat(TRANSCRIPT_CAPS.textChars)}… [cut: 1000 more characters]`);
    expect(entries[3]!.text).toBe('after the restart');

    // A run the control plane does not know is sent nothing more, and leaves nothing pending.
    runs.set('run-unknown-there', going);
    transcripts.append('run-unknown-there', [{ kind: 'message', tool: null, text: 'nobody holds me' }]);
    await waitUntil('nothing pending', () => (transcripts.pendingCount() === 0 ? true : undefined), 5_000, 20);
    transcripts.append('run-unknown-there', [{ kind: 'message', tool: null, text: 'nor me' }]);
    expect(transcripts.pendingCount()).toBe(0);
    expect(heldOf('run-unknown-there')).toEqual([]);
    await transcripts.stop();
  });

  it('stops at once while a push hangs, keeping its entries for the next process', { timeout: 20_000 }, async () => {
    // A control plane that takes the request and never answers.
    const silent = await startLoopbackServer(() => undefined);
    runs.set('run-hang', going);
    const transcripts = gateTranscripts(silent.origin, 'transcripts-of-a-silent-control-plane');
    transcripts.load();
    transcripts.start();
    transcripts.append('run-hang', [{ kind: 'message', tool: null, text: 'held' }]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stopping = Date.now();
    await transcripts.stop();
    expect(Date.now() - stopping).toBeLessThan(2_000);
    expect(transcripts.pendingCount()).toBe(1);
    await silent.close();
  });

  it('keeps at most 5,000 entries of a run, the last saying it was cut', { timeout: 60_000 }, async () => {
    runs.set('run-long', going);
    const transcripts = gateTranscripts();
    transcripts.load();
    transcripts.start();
    const drafts = Array.from({ length: TRANSCRIPT_CAPS.entriesPerRun + 50 }, (_, n) => ({ kind: 'tool_call' as const, tool: 'Bash', text: `step ${n + 1}` }));
    for (let start = 0; start < drafts.length; start += 500) transcripts.append('run-long', drafts.slice(start, start + 500));
    await waitUntil('the whole transcript', () => (heldOf('run-long').length === TRANSCRIPT_CAPS.entriesPerRun + 1 ? true : undefined), 50_000, 100);
    await transcripts.stop();
    const entries = heldOf('run-long');
    expect(entries.at(-2)).toMatchObject({ seq: TRANSCRIPT_CAPS.entriesPerRun, text: `step ${TRANSCRIPT_CAPS.entriesPerRun}` });
    expect(entries.at(-1)).toMatchObject({ seq: TRANSCRIPT_CAPS.entriesPerRun + 1, kind: 'lifecycle' });
    expect(entries.at(-1)!.text).toContain('the transcript is cut here');
  });

  it("follows a tool's stream from the session it launched: an earlier run's lines are not read, and a new session is read from its start", { timeout: 30_000 }, async () => {
    runs.set('run-tail', going);
    const records = join(dir, 'records-tail');
    await mkdir(records, { recursive: true });
    const stream = join(records, 'events.jsonl');
    const line = (text: string) => `${json({ type: 'item.completed', item: { type: 'agent_message', text } })}\n`;
    // The project's previous run left its stream, written before this session started.
    await writeFile(stream, line('from the earlier run'));
    const past = new Date(Date.now() - 60_000);
    await utimes(stream, past, past);
    const transcripts = gateTranscripts();
    transcripts.load();
    transcripts.start();
    transcripts.launched('run-tail', 'codex', records);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(heldOf('run-tail')).toEqual([]);
    // The runner empties it and the tool writes.
    await truncate(stream, 0);
    await appendFile(stream, line('one') + json({ type: 'turn.completed', usage: { input_tokens: 10, output_tokens: 2 } }) + '\n');
    await waitUntil('the first session', () => (heldOf('run-tail').length === 2 ? true : undefined), 5_000, 20);
    // A continuation: the gate launches the tool again, and the runner opens the stream fresh.
    transcripts.launched('run-tail', 'codex', records);
    await truncate(stream, 0);
    await appendFile(stream, line('two'));
    await waitUntil('the second session', () => (heldOf('run-tail').length === 3 ? true : undefined), 5_000, 20);
    await transcripts.stop();
    expect(heldOf('run-tail').map((entry) => [entry.kind, entry.text])).toEqual([
      ['message', 'one'],
      ['usage', '12 tokens so far (input 10, output 2)'],
      ['message', 'two'],
    ]);
  });
});
