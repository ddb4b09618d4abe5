import type { ServerResponse } from 'node:http';
import type { ProviderBatchSettings } from '../../capabilities/research/provider-batch.ts';
import { startLoopbackServer, type ReceivedRequest } from './receiver.ts';

/**
 * A real OpenAI-compatible research provider on 127.0.0.1: `GET /quota` answers the quota the test sets, and
 * `POST /v1/chat/completions` answers as the test's handler says (by default, the candidates the test sets).
 */

export type ChatHandler = (request: ReceivedRequest, response: ServerResponse) => void;

export const PROVIDER_API_KEY = 'sk-provider-DO-NOT-LOG-5678';

export const quotaBody = (remainingCredits = 50, windowRemaining = 100) => ({
  remaining_credits: remainingCredits,
  window: { limit: 120, remaining: windowRemaining, resets_at: '2026-11-24T00:00:00Z' },
});

export const chatCompletion = (content: string, usage: Record<string, number> = { prompt_tokens: 900, completion_tokens: 400, total_tokens: 1300, cost: 0.0042 }) => ({
  id: 'chatcmpl-provider',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  usage,
});

export const answerJson = (status: number, body: unknown): ChatHandler => (_request, response) => {
  response.writeHead(status, { 'content-type': 'application/json' }).end(typeof body === 'string' ? body : JSON.stringify(body));
};

export class FakeProvider {
  readonly chats: ReceivedRequest[] = [];
  readonly quotaReads: ReceivedRequest[] = [];
  /** What GET /quota answers: a body (200), or a status with no body. */
  quota: unknown = quotaBody();
  quotaStatus = 200;
  chat: ChatHandler;
  private server!: { origin: string; close: () => Promise<void> };

  private constructor(candidates: unknown[]) {
    this.chat = answerJson(200, chatCompletion(JSON.stringify({ candidates })));
  }

  static async start(candidates: unknown[] = []): Promise<FakeProvider> {
    const provider = new FakeProvider(candidates);
    provider.server = await startLoopbackServer((received, response) => {
      if (received.url === '/quota') {
        provider.quotaReads.push(received);
        response.writeHead(provider.quotaStatus, { 'content-type': 'application/json' }).end(JSON.stringify(provider.quota));
        return;
      }
      provider.chats.push(received);
      provider.chat(received, response);
    });
    return provider;
  }

  /** Every later chat request is answered with these candidates. */
  proposes(candidates: unknown[]): void {
    this.chat = answerJson(200, chatCompletion(JSON.stringify({ candidates })));
  }

  get origin(): string {
    return this.server.origin;
  }

  settings(overrides: { timeout_ms?: number; minRemainingCredits?: number; requestReserve?: number; quota_url?: string } = {}): ProviderBatchSettings {
    return {
      provider: {
        base_url: `${this.origin}/v1`,
        model: 'research-model-1',
        quota_url: overrides.quota_url ?? `${this.origin}/quota`,
        api_key: PROVIDER_API_KEY,
        timeout_ms: overrides.timeout_ms ?? 5_000,
      },
      missing: [],
      limits: { minRemainingCredits: overrides.minRemainingCredits ?? 5, requestReserve: overrides.requestReserve ?? 10 },
    };
  }

  close(): Promise<void> {
    return this.server.close();
  }
}
