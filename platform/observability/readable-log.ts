import type { DestinationStream } from 'pino';

/** How the process writes its log: JSON lines for machines, or short lines for a person at a terminal. */
export type LogFormat = 'json' | 'readable';

/** LOG_FORMAT=json or LOG_FORMAT=readable decides; otherwise readable on a terminal and JSON anywhere else. */
export function logFormatFrom(env: Readonly<Record<string, string | undefined>>, isTerminal: boolean): LogFormat {
  const asked = env.LOG_FORMAT?.trim().toLowerCase();
  if (asked === 'json' || asked === 'readable') return asked;
  return isTerminal ? 'readable' : 'json';
}

const LEVEL_NAMES: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
/** Fields every line carries, which a person at a terminal does not need repeated. */
const OMITTED = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service', 'err']);
/** A longer value (a whole config, a list of runs) is left out or cut: LOG_FORMAT=json shows it whole. */
const MAX_STRUCTURED_CHARS = 80;
const MAX_TEXT_CHARS = 160;

/** A request reads as what a person would type: `req=GET /control/api/status`, not `req={…}`. */
function requestText(value: unknown): string | null {
  if (typeof value !== 'object' || value === null) return null;
  const { method, url } = value as { method?: unknown; url?: unknown };
  return typeof method === 'string' && typeof url === 'string' ? `${method} ${url}` : null;
}

function valueText(value: unknown): string {
  if (typeof value === 'object' && value !== null) {
    const text = JSON.stringify(value);
    return text.length > MAX_STRUCTURED_CHARS ? (Array.isArray(value) ? `[…${value.length}]` : '{…}') : text;
  }
  const text = typeof value === 'string' ? (/[\s"=]/.test(value) ? JSON.stringify(value) : value) : String(value);
  return text.length > MAX_TEXT_CHARS ? `${text.slice(0, MAX_TEXT_CHARS)}…` : text;
}

/** One JSON log line as a person reads it: `12:00:01 WARN  message key=value`, an error's message and stack below. */
export function readableLine(line: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  const time = typeof entry.time === 'number' ? new Date(entry.time).toISOString().slice(11, 19) : '';
  const level = (LEVEL_NAMES[entry.level as number] ?? String(entry.level)).toUpperCase().padEnd(5);
  const fields = Object.entries(entry)
    .filter(([key]) => !OMITTED.has(key))
    .map(([key, value]) => `${key}=${valueText((key === 'req' ? requestText(value) : null) ?? value)}`);
  let out = `${time} ${level} ${String(entry.msg ?? '')}${fields.length > 0 ? `  ${fields.join(' ')}` : ''}\n`;
  const error = entry.err as { message?: unknown; stack?: unknown } | undefined;
  if (error && typeof error === 'object') {
    const detail = typeof error.stack === 'string' ? error.stack : String(error.message ?? '');
    out += detail.split('\n').map((each) => `    ${each}\n`).join('');
  }
  return out;
}

/** A pino destination that writes each line readably to `out` (the same stream the banners go to, so order holds). */
export function readableDestination(out: { write(text: string): unknown }): DestinationStream {
  return { write: (line: string) => void out.write(readableLine(line)) };
}
