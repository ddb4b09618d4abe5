import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { HostedWriterError, hostedWriterMessages, writeHostedDraft, type HostedWriterFailureKind, type HostedWriterSettings } from '../../capabilities/papers/paper-writer.ts';
import { automatedChecklistPassed, judgeDraft } from '../../capabilities/papers/domain/paper-checklist.ts';
import { draftEvidence } from '../support/draft-evidence.ts';
import { DRAFT_SECTIONS, deterministicDraft, resultValues, type Draft, type DraftEvidence } from '../../capabilities/papers/domain/paper-draft.ts';

const API_KEY = 'sk-test-DO-NOT-LOG-1234';

const evidence = draftEvidence;

interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** What the fake writer does with a request: answer it, or leave it hanging. */
type Handler = (request: ReceivedRequest, response: ServerResponse) => void;

/** A real OpenAI-compatible endpoint on 127.0.0.1, answering as the test tells it. */
class FakeWriter {
  readonly received: ReceivedRequest[] = [];
  private readonly server: Server;

  private constructor(server: Server) {
    this.server = server;
  }

  static async start(handler: Handler): Promise<FakeWriter> {
    const server = createServer();
    const writer = new FakeWriter(server);
    server.on('request', (request, response) => {
      let body = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => (body += chunk));
      request.on('end', () => {
        const received = { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body };
        writer.received.push(received);
        handler(received, response);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    return writer;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const writers: FakeWriter[] = [];
afterEach(async () => {
  await Promise.all(writers.splice(0).map((writer) => writer.close()));
});

async function fakeWriter(handler: Handler): Promise<FakeWriter> {
  const writer = await FakeWriter.start(handler);
  writers.push(writer);
  return writer;
}

const answerJson = (status: number, body: unknown, headers: Record<string, string> = {}): Handler => (_request, response) => {
  response.writeHead(status, { 'content-type': 'application/json', ...headers }).end(typeof body === 'string' ? body : JSON.stringify(body));
};

const completion = (content: string, finishReason = 'stop') => ({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: finishReason }],
});

const settings = (baseUrl: string, overrides: Partial<HostedWriterSettings> = {}): HostedWriterSettings => ({
  base_url: baseUrl,
  model: 'paper-writer-large',
  api_key: API_KEY,
  timeout_ms: 5_000,
  temperature: 0.2,
  max_tokens: 4_096,
  ...overrides,
});

/** Awaits the rejection and checks that nothing about it carries the api key. */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  const error = await promise.then(
    () => expect.fail('the call resolved, a failure was expected'),
    (reason: unknown) => reason,
  );
  const err = error as Error;
  for (const text of [err.message, String(err), JSON.stringify(err), err.stack ?? '']) expect(text).not.toContain(API_KEY);
  return error;
}

async function writerFailure(promise: Promise<unknown>, kind: HostedWriterFailureKind): Promise<HostedWriterError> {
  const error = await rejectionOf(promise);
  expect(error).toBeInstanceOf(HostedWriterError);
  const failure = error as HostedWriterError;
  expect(failure.name).toBe('HostedWriterError');
  expect(failure.kind, failure.message).toBe(kind);
  return failure;
}

/** The paper a well-behaved writer would send back: the deterministic writer's, byte for byte. */
const paper = (e: DraftEvidence): Draft => deterministicDraft(e);

describe('the hosted paper writer client', () => {
  it('posts one chat/completions request and returns the draft it answers', async () => {
    const expected = paper(evidence());
    const writer = await fakeWriter(answerJson(200, completion(JSON.stringify(expected))));

    const draft = await writeHostedDraft(settings(writer.baseUrl), evidence());

    expect(draft).toEqual(expected);
    expect(writer.received).toHaveLength(1);
    const [request] = writer.received;
    expect(request!.method).toBe('POST');
    expect(request!.url).toBe('/v1/chat/completions');
    expect(request!.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(request!.headers['content-type']).toBe('application/json');
    const body = JSON.parse(request!.body) as Record<string, unknown>;
    expect(body).toMatchObject({ model: 'paper-writer-large', temperature: 0.2, max_tokens: 4_096, response_format: { type: 'json_object' } });
    expect(body.messages).toEqual(hostedWriterMessages(evidence()));
    const prompt = (body.messages as { content: string }[]).map((message) => message.content).join('\n');
    expect(prompt).toContain('finalize_positive');
    expect(prompt).toContain('"value": "0.915"');
    expect(prompt).toContain('runs[1].loss');
  });

  it('accepts the JSON object wrapped in a ```json fence', async () => {
    const expected = paper(evidence());
    const writer = await fakeWriter(answerJson(200, completion(`\`\`\`json\n${JSON.stringify(expected, null, 2)}\n\`\`\`\n`)));
    expect(await writeHostedDraft(settings(writer.baseUrl), evidence())).toEqual(expected);
  });

  it('joins base_url and the path with one slash, and sends no Authorization header without a key', async () => {
    const writer = await fakeWriter(answerJson(200, completion(JSON.stringify(paper(evidence())))));
    await writeHostedDraft(settings(`${writer.baseUrl}/`, { api_key: '' }), evidence());
    expect(writer.received[0]!.url).toBe('/v1/chat/completions');
    expect(writer.received[0]!.headers.authorization).toBeUndefined();
  });

  it('returns a draft that passes the automated checklist when the writer answers a well-formed paper', async () => {
    const e = evidence();
    const writer = await fakeWriter(answerJson(200, completion(JSON.stringify(paper(e)))));
    const draft = await writeHostedDraft(settings(writer.baseUrl), e);
    const judgements = judgeDraft({ ...draft, results: resultValues(e.results) });
    expect(judgements.filter((judgement) => judgement.status === 'fail')).toEqual([]);
    expect(automatedChecklistPassed(judgements)).toBe(true);
  });

  it('times out when the writer never answers, naming the timeout in seconds', async () => {
    const writer = await fakeWriter(() => {});
    const started = performance.now();
    const failure = await writerFailure(writeHostedDraft(settings(writer.baseUrl, { timeout_ms: 300 }), evidence()), 'timeout');
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(failure.status).toBeNull();
    expect(failure.message).toContain('0.3 s');
  });

  it('times out when the writer sends headers and then stalls the body', async () => {
    const writer = await fakeWriter((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"choices": [');
    });
    await writerFailure(writeHostedDraft(settings(writer.baseUrl, { timeout_ms: 300 }), evidence()), 'timeout');
  });

  it('reports a 5xx as server_error with its status, without the key even when the body echoes it', async () => {
    const writer = await fakeWriter((request, response) => {
      answerJson(500, { error: { message: `internal error for ${request.headers.authorization}` } })(request, response);
    });
    const failure = await writerFailure(writeHostedDraft(settings(writer.baseUrl), evidence()), 'server_error');
    expect(failure.status).toBe(500);
    expect(failure.message).toContain('answered 500');
    expect(failure.message).toContain('internal error for Bearer [redacted]');
  });

  it('reports a 429 as rate_limited', async () => {
    const writer = await fakeWriter(answerJson(429, { error: { message: 'slow down' } }, { 'retry-after': '7' }));
    const failure = await writerFailure(writeHostedDraft(settings(writer.baseUrl), evidence()), 'rate_limited');
    expect(failure.status).toBe(429);
    expect(failure.message).toContain('retry after 7');
  });

  it('reports any other non-2xx as http_error, and follows no redirect', async () => {
    const notFound = await fakeWriter(answerJson(401, { error: { message: 'invalid api key' } }));
    expect((await writerFailure(writeHostedDraft(settings(notFound.baseUrl), evidence()), 'http_error')).status).toBe(401);

    const elsewhere = await fakeWriter(answerJson(200, completion(JSON.stringify(paper(evidence()))))); // never reached
    const moved = await fakeWriter((_request, response) => response.writeHead(307, { location: `${elsewhere.baseUrl}/chat/completions` }).end());
    const failure = await writerFailure(writeHostedDraft(settings(moved.baseUrl), evidence()), 'http_error');
    expect(failure.status).toBe(307);
    expect(elsewhere.received).toEqual([]);
  });

  it.each([
    ['a body that is not JSON', '<html>Bad gateway</html>', "the writer's answer was not JSON"],
    ['an answer without choices', { error: 'nothing' }, 'no choices[0].message.content'],
    ['empty choices', { choices: [] }, 'no choices[0].message.content'],
    ['content that is not JSON', completion('Here is your paper: # Title'), 'not a JSON object with title, abstract and markdown'],
    ['content without markdown', completion(JSON.stringify({ title: 'A fine title', abstract: 'An abstract.' })), 'markdown'],
    ['an empty title', completion(JSON.stringify({ title: '  ', abstract: 'An abstract.', markdown: '# x' })), 'title'],
    ['a title too long', completion(JSON.stringify({ title: 'x'.repeat(1_001), abstract: 'An abstract.', markdown: '# x' })), 'title'],
    ['content cut off at max_tokens', completion('{"title": "A fine title", "abstr', 'length'), 'stopped at max_tokens (4096)'],
  ])('reports %s as malformed_output', async (_what, body, says) => {
    const writer = await fakeWriter(answerJson(200, body));
    const failure = await writerFailure(writeHostedDraft(settings(writer.baseUrl), evidence()), 'malformed_output');
    expect(failure.message).toContain(says);
    expect(failure.message.length).toBeLessThan(500);
  });

  it('stops reading an answer larger than 5 MiB and reports malformed_output', async () => {
    const huge = JSON.stringify(completion('x'.repeat(6 * 1024 * 1024)));
    const writer = await fakeWriter((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' }); // no content-length: chunked
      response.end(huge);
    });
    const failure = await writerFailure(writeHostedDraft(settings(writer.baseUrl), evidence()), 'malformed_output');
    expect(failure.message).toContain('larger than');
  });

  it('never quotes more than a short excerpt of the body', async () => {
    const writer = await fakeWriter(answerJson(200, `not json ${'y'.repeat(10_000)}`));
    const failure = await writerFailure(writeHostedDraft(settings(writer.baseUrl), evidence()), 'malformed_output');
    expect(failure.message.length).toBeLessThan(300);
  });

  it('reports a closed port as unreachable', async () => {
    const closed = await FakeWriter.start(() => {});
    const baseUrl = closed.baseUrl;
    await closed.close();
    const failure = await writerFailure(writeHostedDraft(settings(baseUrl), evidence()), 'unreachable');
    expect(failure.status).toBeNull();
    expect(failure.message).toContain('ECONNREFUSED');
  });

  it('keeps a key that no header can carry out of the error', async () => {
    const writer = await fakeWriter(() => {});
    const failure = await writerFailure(writeHostedDraft(settings(writer.baseUrl, { api_key: `${API_KEY}\n` }), evidence()), 'http_error');
    expect(failure.message).not.toContain(API_KEY);
    expect(writer.received).toEqual([]);
  });

  it("rethrows the caller's abort as it is, not as a writer failure", async () => {
    const writer = await fakeWriter(() => {});
    const controller = new AbortController();
    const call = writeHostedDraft(settings(writer.baseUrl), evidence(), { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    const error = await rejectionOf(call);
    expect(error).not.toBeInstanceOf(HostedWriterError);
    expect((error as Error).name).toBe('AbortError');

    const cancelled = new Error('activity cancelled');
    const again = new AbortController();
    again.abort(cancelled);
    expect(await rejectionOf(writeHostedDraft(settings(writer.baseUrl), evidence(), { signal: again.signal }))).toBe(cancelled);
  });
});

describe('the messages sent to the writer', () => {
  it('ask for one JSON object with every section in order, and numbers only from the results', () => {
    const [system] = hostedWriterMessages(evidence());
    expect(system!.role).toBe('system');
    expect(system!.content).toContain('{"title": string, "abstract": string, "markdown": string}');
    const positions = DRAFT_SECTIONS.map((name) => system!.content.indexOf(`## ${name}`));
    expect(positions.every((position) => position >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(system!.content).toContain('Every number you write outside code spans must be one of the result_values');
  });

  it('give the evidence, bounding the notes and the result values', () => {
    const many = { path: 'results/sweep.json', data: Array.from({ length: 500 }, (_, index) => index + 0.5) };
    const [, user] = hostedWriterMessages(evidence({ results: [many], run_notes: 'n'.repeat(50_000) }));
    expect(user!.role).toBe('user');
    const shown = JSON.parse(user!.content.slice(user!.content.indexOf('{'))) as Record<string, unknown>;
    expect(shown).toMatchObject({
      project_id: 'sparse-attention',
      run_id: 'sparse-attention-20261122T100000Z',
      finished_at: '2026-11-22T10:20:00Z',
      decision: 'finalize_positive',
      result_files: ['results/sweep.json'],
      result_values_not_shown: 300,
      run_notes_truncated: true,
    });
    expect(shown.result_values).toHaveLength(200);
    expect((shown.result_values as unknown[])[0]).toEqual({ file: 'results/sweep.json', key: '[0]', value: '0.5' });
    expect((shown.run_notes as string).length).toBe(20_000);
  });
});
