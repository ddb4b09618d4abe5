import type { LaunchedRuntime } from '../contract/agent-runtimes.ts';
import type { TranscriptDraft } from '../contract/run-transcript.ts';

/**
 * Turns a real tool's machine-readable stream (the lines the runner keeps in `events.jsonl`) into transcript entries
 * (docs/runs.md#following-a-run-live): Codex CLI's `--json` items, Claude Code's `stream-json` messages. Token usage
 * is not read here: the runner's own reading of the stream (readStreamLine) gives it. A line that does not parse, or
 * that says nothing an operator reads, gives no entry.
 */
export interface StreamTranscriptReader {
  read(line: string): TranscriptDraft[];
}

/** Tool call ids whose names are kept, to name the tool of a later result; older ones are dropped past this many. */
const KNOWN_CALLS_KEPT = 500;

type Json = Record<string, unknown>;

const asObject = (value: unknown): Json | null => (value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : null);
const asText = (value: unknown): string | null => (typeof value === 'string' ? value : null);

function parseLine(line: string): Json | null {
  if (line.trim() === '') return null;
  try {
    return asObject(JSON.parse(line));
  } catch {
    return null;
  }
}

/** A tool's input as an operator reads it: its command where it has one, else its JSON. */
function inputText(input: unknown): string {
  const object = asObject(input);
  const command = asText(object?.command) ?? asText(object?.cmd);
  return command ?? JSON.stringify(input ?? {});
}

const entry = (kind: TranscriptDraft['kind'], text: string, tool: string | null = null): TranscriptDraft => ({ kind, text, tool });

function codexReader(): StreamTranscriptReader {
  return {
    read(line) {
      const event = parseLine(line);
      if (!event) return [];
      const type = event.type;
      if (type === 'turn.failed') return [entry('lifecycle', `turn failed: ${asText(asObject(event.error)?.message) ?? 'no reason given'}`)];
      if (type === 'error') return [entry('lifecycle', `error: ${asText(event.message) ?? 'no reason given'}`)];
      const item = asObject(event.item);
      if (!item || (type !== 'item.started' && type !== 'item.completed')) return [];
      const started = type === 'item.started';
      switch (item.type) {
        case 'agent_message':
          return started ? [] : [entry('message', asText(item.text) ?? '')];
        case 'reasoning':
          return started ? [] : [entry('message', `thinking: ${asText(item.text) ?? ''}`)];
        case 'command_execution': {
          if (started) return [entry('tool_call', asText(item.command) ?? '', 'command_execution')];
          const exit = typeof item.exit_code === 'number' ? `exit ${item.exit_code}` : `status ${asText(item.status) ?? 'unknown'}`;
          return [entry('tool_output', `${exit}\n${asText(item.aggregated_output) ?? ''}`, 'command_execution')];
        }
        case 'file_change': {
          if (started) return [];
          const changes = Array.isArray(item.changes) ? item.changes.map(asObject).filter((change) => change !== null) : [];
          return [entry('tool_call', changes.map((change) => `${asText(change.kind) ?? 'change'} ${asText(change.path) ?? '?'}`).join('\n'), 'file_change')];
        }
        case 'mcp_tool_call': {
          const tool = `${asText(item.server) ?? 'mcp'}.${asText(item.tool) ?? '?'}`;
          if (started) return [entry('tool_call', JSON.stringify(item.arguments ?? {}), tool)];
          return [entry('tool_output', JSON.stringify(item.error ?? item.result ?? null), tool)];
        }
        case 'web_search':
          return started ? [] : [entry('tool_call', asText(item.query) ?? '', 'web_search')];
        case 'todo_list': {
          if (started) return [];
          const items = Array.isArray(item.items) ? item.items.map(asObject).filter((todo) => todo !== null) : [];
          return [entry('message', `plan:\n${items.map((todo) => `${todo.completed === true ? '[x]' : '[ ]'} ${asText(todo.text) ?? ''}`).join('\n')}`)];
        }
        case 'error':
          return started ? [] : [entry('lifecycle', `error: ${asText(item.message) ?? ''}`)];
        default:
          return [];
      }
    },
  };
}

function claudeCodeReader(): StreamTranscriptReader {
  const toolNames = new Map<string, string>();
  const remember = (id: string, name: string) => {
    toolNames.set(id, name);
    if (toolNames.size > KNOWN_CALLS_KEPT) toolNames.delete(toolNames.keys().next().value!);
  };
  const blocksOf = (event: Json) => {
    const content = asObject(event.message)?.content;
    return Array.isArray(content) ? content.map(asObject).filter((block) => block !== null) : [];
  };
  return {
    read(line) {
      const event = parseLine(line);
      if (!event) return [];
      if (event.type === 'result') return event.is_error === true ? [entry('lifecycle', `error: ${asText(event.result) ?? asText(event.subtype) ?? 'no reason given'}`)] : [];
      if (event.type === 'assistant') {
        return blocksOf(event).flatMap((block) => {
          if (block.type === 'text') return [entry('message', asText(block.text) ?? '')];
          if (block.type === 'thinking') return [entry('message', `thinking: ${asText(block.thinking) ?? ''}`)];
          if (block.type !== 'tool_use') return [];
          const name = asText(block.name) ?? 'tool';
          const id = asText(block.id);
          if (id) remember(id, name);
          return [entry('tool_call', inputText(block.input), name)];
        });
      }
      if (event.type === 'user') {
        return blocksOf(event)
          .filter((block) => block.type === 'tool_result')
          .map((block) => {
            const content = Array.isArray(block.content)
              ? block.content.map((part) => asText(asObject(part)?.text) ?? '').join('\n')
              : (asText(block.content) ?? '');
            const id = asText(block.tool_use_id);
            return entry('tool_output', `${block.is_error === true ? 'error\n' : ''}${content}`, (id && toolNames.get(id)) ?? null);
          });
      }
      return [];
    },
  };
}

export function streamTranscriptReader(runtime: LaunchedRuntime): StreamTranscriptReader {
  return runtime === 'codex' ? codexReader() : claudeCodeReader();
}
