import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { testPort } from './ports.ts';

/**
 * Scripted model servers that real agent tools talk to, offline: the OpenAI Responses API (Codex CLI posts to
 * `{base_url}/responses`, streamed). A test scripts the steps of one conversation under a key that its prompt holds
 * (several runs can share the server at once); each request whose conversation holds the key takes the next step: a
 * shell command for the tool to run, a final message, or a question to the user. The wire facts (the least a turn
 * must carry, ids unique across restarts) are those the README's "Running real agents" section states.
 */
export type ModelStep =
  | { kind: 'command'; cmd: string; usage?: number }
  | { kind: 'message'; text: string; usage?: number }
  | { kind: 'question'; question: string; usage?: number };

export interface RecordedRequest {
  at: number;
  /** The request body as the tool sent it. */
  body: Record<string, any>;
  /** The script key the conversation held, or null. */
  key: string | null;
}

export class ResponsesServer {
  readonly requests: RecordedRequest[] = [];
  private readonly scripts = new Map<string, ModelStep[]>();
  private server: Server | undefined;
  // Ids must never repeat, not even across a restart of this server: a resumed session refers to earlier ones.
  private readonly idPrefix = randomBytes(6).toString('hex');
  private served = 0;

  readonly port: number;

  private constructor(port: number) {
    this.port = port;
  }

  static async start(): Promise<ResponsesServer> {
    const server = new ResponsesServer(await testPort());
    await server.up();
    return server;
  }

  /** The base URL a tool is configured with (Codex: OPENAI_BASE_URL). */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /**
   * The steps that the requests of the conversation whose prompt holds `key` take, in order; a request past the end,
   * or one holding no key, is answered with a short final message.
   */
  script(key: string, steps: ModelStep[]): void {
    this.scripts.set(key, [...steps]);
  }

  /** The requests of the conversation that holds `key`. */
  requestsOf(key: string): RecordedRequest[] {
    return this.requests.filter((request) => request.key === key);
  }

  async up(): Promise<void> {
    const server = createServer((request, response) => void this.answer(request, response));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    let text = '';
    for await (const chunk of request) text += chunk;
    if (request.method !== 'POST' || !request.url?.endsWith('/responses')) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    const body = JSON.parse(text) as Record<string, any>;
    const key = [...this.scripts.keys()].find((candidate) => text.includes(candidate)) ?? null;
    this.requests.push({ at: Date.now(), body, key });
    const step = (key ? this.scripts.get(key)?.shift() : undefined) ?? { kind: 'message', text: 'Nothing more to do.' };
    const n = ++this.served;
    const id = (kind: string) => `${kind}_${this.idPrefix}_${n}`;
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (event: Record<string, unknown>) => response.write(`event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`);
    send({ type: 'response.created', response: { id: id('resp') } });
    send({ type: 'response.output_item.done', output_index: 0, item: this.itemFor(step, id) });
    const usage = step.usage ?? 100;
    send({
      type: 'response.completed',
      response: {
        id: id('resp'),
        usage: { input_tokens: usage, input_tokens_details: { cached_tokens: 0 }, output_tokens: 10, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: usage + 10 },
      },
    });
    response.end();
  }

  private itemFor(step: ModelStep, id: (kind: string) => string): Record<string, unknown> {
    switch (step.kind) {
      case 'command':
        return { type: 'function_call', id: id('fc'), call_id: id('call'), name: 'exec_command', arguments: JSON.stringify({ cmd: step.cmd }) };
      case 'question':
        return {
          type: 'function_call',
          id: id('fc'),
          call_id: id('call'),
          name: 'request_user_input',
          arguments: JSON.stringify({ questions: [{ id: 'q1', header: 'Question', question: step.question, options: [{ label: 'Yes', description: 'go on' }, { label: 'No', description: 'stop' }] }] }),
        };
      case 'message':
        return { type: 'message', role: 'assistant', id: id('msg'), content: [{ type: 'output_text', text: step.text }] };
    }
  }
}
