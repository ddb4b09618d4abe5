import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/**
 * Scripted model servers that real agent tools talk to, offline (the tests of real agents, and `npm run
 * model:scripted` for trying one by hand): the OpenAI Responses API (Codex CLI posts to
 * `{base_url}/responses`, streamed) and the Anthropic Messages API (Claude Code posts to `{base_url}/v1/messages`,
 * streamed). A test scripts the steps of one conversation under a key that its prompt holds (several runs can share
 * the server at once); each request whose conversation holds the key takes the next step: a shell command for the
 * tool to run, a file to write, a final message, or a question to the user. The wire facts (the least a turn must
 * carry, ids unique across restarts) are those docs/worker-gate.md#running-real-agents states.
 */
/** `usage`: the input tokens the answer reports (100 when absent; output is 10); `delayMs`: how long it takes. */
export type ModelStep = { usage?: number; delayMs?: number } & (
  | { kind: 'command'; cmd: string }
  | { kind: 'write'; path: string; content: string }
  | { kind: 'message'; text: string }
  | { kind: 'question'; question: string }
  /** The request is accepted and never answered: a model server that hangs. */
  | { kind: 'hang' }
  /** The request is answered with this HTTP status and an error body, as a failing model server answers. */
  | { kind: 'fail'; status: number }
  /** The request is refused with 429 for a usage limit that resets `resetSec` from now, as each API words one. */
  | { kind: 'limit'; resetSec: number }
);

/** A step the server answers with a model's turn. */
type AnsweredStep = Exclude<ModelStep, { kind: 'hang' } | { kind: 'fail' } | { kind: 'limit' }>;

/** What `npm run model:scripted` answers every conversation with: the agent writes a finished study, then ends. */
export const FINISHED_STUDY: ModelStep[] = [
  { kind: 'write', path: 'run_notes.md', content: '# Run notes\n\nThe method scored 0.91 against a baseline of 0.85 over three seeds.\n' },
  { kind: 'write', path: 'results/scripted/metrics.json', content: '{"score": 0.91, "baseline_score": 0.85, "seeds": 3}\n' },
  { kind: 'write', path: '.research/decision.json', content: '{"decision": "finalize_positive", "summary": "The method beats its baseline."}\n' },
  { kind: 'message', text: 'The study is done: the method beats its baseline.' },
];

export interface RecordedRequest {
  at: number;
  /** The request body as the tool sent it. */
  body: Record<string, any>;
  /** The script key the conversation held, or null. */
  key: string | null;
}

/** What both servers share: the scripts, the recorded requests, the port kept across a restart. */
abstract class ScriptedModelServer {
  readonly requests: RecordedRequest[] = [];
  private readonly scripts = new Map<string, ModelStep[]>();
  private server: Server | undefined;
  // Ids must never repeat, not even across a restart of this server: a resumed session refers to earlier ones.
  private readonly idPrefix = randomBytes(6).toString('hex');
  private served = 0;

  readonly port: number;
  /** The steps of a conversation that holds no scripted key, taken by how many tool results it already carries. */
  private readonly fallback: ModelStep[];

  protected constructor(port: number, fallback: ModelStep[]) {
    this.port = port;
    this.fallback = fallback;
  }

  /** The base URL a tool is configured with. */
  abstract get baseUrl(): string;
  /** Whether a request goes to the model (anything else is 404). */
  protected abstract isModelRequest(request: IncomingMessage): boolean;
  /** How many tool results the conversation so far carries: where an unscripted conversation is in `fallback`. */
  protected abstract toolResultsIn(body: Record<string, any>): number;
  /** The 429 this API refuses a request with for a usage limit resetting `resetSec` from now: its headers and body. */
  protected abstract usageLimit(resetSec: number): { headers: Record<string, string>; body: Record<string, unknown> };
  /** Streams the answer that takes `step`. */
  protected abstract stream(step: AnsweredStep, id: (kind: string) => string, response: ServerResponse): void;

  /**
   * The steps that the requests of the conversation whose prompt holds `[key]` take, in order. A request past the
   * end is answered with a short final message, and so is one holding no key, past the fallback steps.
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
    if (request.method !== 'POST' || !this.isModelRequest(request)) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    const body = JSON.parse(text) as Record<string, any>;
    // Bracketed, as the prompts write it: a bare key such as `claude-a` may also be a prefix of words a tool's own
    // system prompt holds.
    const key = [...this.scripts.keys()].find((candidate) => text.includes(`[${candidate}]`)) ?? null;
    this.requests.push({ at: Date.now(), body, key });
    const scripted = key ? this.scripts.get(key)?.shift() : this.fallback[this.toolResultsIn(body)];
    const step = scripted ?? { kind: 'message', text: 'Nothing more to do.' };
    const n = ++this.served;
    if (step.delayMs) await new Promise((resolve) => setTimeout(resolve, step.delayMs));
    if (response.destroyed || step.kind === 'hang') return;
    if (step.kind === 'fail') {
      response.writeHead(step.status, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: `scripted failure ${step.status}` } }));
      return;
    }
    if (step.kind === 'limit') {
      const refusal = this.usageLimit(step.resetSec);
      response.writeHead(429, { 'content-type': 'application/json', 'retry-after': String(step.resetSec), ...refusal.headers }).end(JSON.stringify(refusal.body));
      return;
    }
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    this.stream(step, (kind) => `${kind}_${this.idPrefix}_${n}`, response);
    response.end();
  }
}

const sse = (response: ServerResponse, event: Record<string, unknown>) => response.write(`event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`);

/** The OpenAI Responses API, as Codex CLI speaks it. */
export class ResponsesServer extends ScriptedModelServer {
  static async start(port: number, fallback: ModelStep[] = []): Promise<ResponsesServer> {
    const server = new ResponsesServer(port, fallback);
    await server.up();
    return server;
  }

  /** The ChatGPT backend's words for a plan's usage limit, which Codex reads (it passes no header on). */
  protected usageLimit(resetSec: number) {
    const resetsAt = Math.ceil(Date.now() / 1000) + resetSec;
    return { headers: {}, body: { error: { type: 'usage_limit_reached', message: 'The usage limit has been reached', resets_in_seconds: resetSec, resets_at: resetsAt } } };
  }

  protected toolResultsIn(body: Record<string, any>): number {
    return Array.isArray(body.input) ? body.input.filter((item: { type?: unknown }) => item?.type === 'function_call_output').length : 0;
  }

  /** Codex: OPENAI_BASE_URL. */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  protected isModelRequest(request: IncomingMessage): boolean {
    return request.url?.endsWith('/responses') ?? false;
  }

  protected stream(step: AnsweredStep, id: (kind: string) => string, response: ServerResponse): void {
    sse(response, { type: 'response.created', response: { id: id('resp') } });
    sse(response, { type: 'response.output_item.done', output_index: 0, item: this.itemFor(step, id) });
    const usage = step.usage ?? 100;
    sse(response, {
      type: 'response.completed',
      response: {
        id: id('resp'),
        usage: { input_tokens: usage, input_tokens_details: { cached_tokens: 0 }, output_tokens: 10, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: usage + 10 },
      },
    });
  }

  private itemFor(step: AnsweredStep, id: (kind: string) => string): Record<string, unknown> {
    const call = (name: string, args: unknown) => ({ type: 'function_call', id: id('fc'), call_id: id('call'), name, arguments: JSON.stringify(args) });
    switch (step.kind) {
      case 'command':
        return call('exec_command', { cmd: step.cmd });
      case 'write':
        return call('exec_command', { cmd: `mkdir -p "$(dirname '${step.path}')" && printf '%s' '${step.content.replace(/'/g, `'\\''`)}' > '${step.path}'` });
      case 'question':
        return call('request_user_input', {
          questions: [{ id: 'q1', header: 'Question', question: step.question, options: [{ label: 'Yes', description: 'go on' }, { label: 'No', description: 'stop' }] }],
        });
      case 'message':
        return { type: 'message', role: 'assistant', id: id('msg'), content: [{ type: 'output_text', text: step.text }] };
    }
  }
}

/**
 * The Anthropic Messages API, as Claude Code speaks it: the whole event sequence of one message, since leaving out
 * `content_block_stop` fails the call and leaving out the closing `message_delta` and `message_stop` hangs it. A
 * question is a tool call that needs a permission (Bash, under the acceptEdits mode): -p mode has no question tool.
 */
export class MessagesServer extends ScriptedModelServer {
  static async start(port: number, fallback: ModelStep[] = []): Promise<MessagesServer> {
    const server = new MessagesServer(port, fallback);
    await server.up();
    return server;
  }

  /** Anthropic's rate-limit refusal with its reset headers (Claude Code words it without them). */
  protected usageLimit(resetSec: number) {
    const resetsAt = new Date(Date.now() + resetSec * 1000);
    return {
      headers: { 'anthropic-ratelimit-requests-reset': resetsAt.toISOString(), 'anthropic-ratelimit-unified-reset': String(Math.ceil(resetsAt.getTime() / 1000)), 'x-should-retry': 'false' },
      body: { type: 'error', error: { type: 'rate_limit_error', message: 'This request would exceed your rate limit.' } },
    };
  }

  protected toolResultsIn(body: Record<string, any>): number {
    const messages: { content?: unknown }[] = Array.isArray(body.messages) ? body.messages : [];
    return messages.flatMap((message) => (Array.isArray(message.content) ? message.content : [])).filter((block: { type?: unknown }) => block?.type === 'tool_result').length;
  }

  /** Claude Code: ANTHROPIC_BASE_URL (it appends /v1/messages). */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  protected isModelRequest(request: IncomingMessage): boolean {
    return /^\/v1\/messages(\?|$)/.test(request.url ?? '');
  }

  protected stream(step: AnsweredStep, id: (kind: string) => string, response: ServerResponse): void {
    const usage = step.usage ?? 100;
    sse(response, {
      type: 'message_start',
      message: { id: id('msg'), type: 'message', role: 'assistant', model: 'scripted-model', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: usage, output_tokens: 1 } },
    });
    const toolUse = (name: string, input: unknown) => {
      sse(response, { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: id('toolu'), name, input: {} } });
      sse(response, { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(input) } });
    };
    switch (step.kind) {
      case 'command':
      case 'question':
        toolUse("Bash", { command: step.kind === "command" ? step.cmd : `curl -s http://127.0.0.1:9/ # ${step.question}`, description: "run it" });
        break;
      case 'write':
        toolUse('Write', { file_path: step.path, content: step.content });
        break;
      case 'message':
        sse(response, { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
        sse(response, { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: step.text } });
    }
    sse(response, { type: 'content_block_stop', index: 0 });
    sse(response, { type: 'message_delta', delta: { stop_reason: step.kind === 'message' ? 'end_turn' : 'tool_use', stop_sequence: null }, usage: { output_tokens: 10 } });
    sse(response, { type: 'message_stop' });
  }
}
