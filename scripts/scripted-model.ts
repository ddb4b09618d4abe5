/**
 * A stand-in model server for trying a real agent offline (docs/worker-gate.md#running-real-agents, trying it offline): the
 * OpenAI Responses API for Codex and the Anthropic Messages API for Claude Code, each on a loopback port of its own.
 * Every conversation goes the same way, whatever its prompt: the agent writes the evidence of a finished study with its
 * own tools (run notes, a results file with a score above its baseline, a positive decision), then says it is done.
 *
 *   npm run model:scripted [-- RESPONSES_PORT MESSAGES_PORT]     (default 8901 and 8902)
 */
import { FINISHED_STUDY, MessagesServer, ResponsesServer } from './scripted-model-servers.ts';

const port = (text: string | undefined, fallback: number) => {
  const value = Number(text ?? fallback);
  if (!Number.isInteger(value) || value < 1 || value > 65_535) throw new Error(`not a port: ${text}`);
  return value;
};

const [responsesPort, messagesPort] = [port(process.argv[2], 8901), port(process.argv[3], 8902)];
const [responses, messages] = await Promise.all([ResponsesServer.start(responsesPort, FINISHED_STUDY), MessagesServer.start(messagesPort, FINISHED_STUDY)]);
console.log(`scripted model servers are up (every conversation writes a finished study, then ends):
  Codex:        OPENAI_BASE_URL=${responses.baseUrl} OPENAI_API_KEY=scripted
  Claude Code:  ANTHROPIC_BASE_URL=${messages.baseUrl} ANTHROPIC_API_KEY=scripted
  stop with Ctrl-C`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void Promise.all([responses.down(), messages.down()]).then(() => process.exit(0)));
}
