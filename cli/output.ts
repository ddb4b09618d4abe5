import { ControlApiError } from 'research-control-plane/client';
import { NotLoggedInError } from './profile.ts';

/** How `rcp` writes: human tables by default, JSON with --json, colour only on a terminal that wants it. */
export interface Output {
  json: boolean;
  out: NodeJS.WriteStream;
  err: NodeJS.WriteStream;
}

/** Exit codes (docs/http.md#rcp-the-command-line). */
export const EXIT = {
  ok: 0,
  /** The server refused the command, or a watched run ended otherwise than completed. */
  failed: 1,
  /** Bad usage: an unknown command or flag, a missing argument, a refused confirmation. */
  usage: 2,
  /** No server to talk to: not logged in, unreachable, or the token refused. */
  unavailable: 3,
} as const;

export const colours = (stream: NodeJS.WriteStream) => {
  const on = stream.isTTY === true && !process.env.NO_COLOR && process.env.TERM !== 'dumb';
  const paint = (code: number) => (text: string) => (on ? `\u001b[${code}m${text}\u001b[0m` : text);
  return { bold: paint(1), dim: paint(2), red: paint(31), green: paint(32), yellow: paint(33) };
};

/** Bad usage found by rcp itself (a value commander cannot check, a live call not confirmed). */
export class UsageError extends Error {}

/** Rows as an aligned table, one header line. */
export function table(rows: Record<string, unknown>[], columns: string[]): string {
  const cell = (value: unknown) => (value === null || value === undefined ? '-' : typeof value === 'object' ? JSON.stringify(value) : String(value));
  const cells = rows.map((row) => columns.map((column) => cell(row[column])));
  const widths = columns.map((column, i) => Math.max(column.length, ...cells.map((line) => line[i]!.length)));
  const line = (values: string[]) => values.map((value, i) => (i === values.length - 1 ? value : value.padEnd(widths[i]!))).join('  ');
  return [line(columns.map((column) => column.toUpperCase())), ...cells.map(line)].join('\n');
}

export function print(output: Output, value: unknown, human: () => string): void {
  output.out.write(`${output.json ? JSON.stringify(value, null, 2) : human()}\n`);
}

/** Any failure as one line on stderr, with its exit code: never a stack trace. */
export function explain(error: unknown): { line: string; code: number } {
  if (error instanceof UsageError) return { line: `error: ${error.message}`, code: EXIT.usage };
  if (error instanceof NotLoggedInError) return { line: `error: ${error.message}`, code: EXIT.unavailable };
  if (error instanceof ControlApiError) {
    const code = error.status === 401 ? EXIT.unavailable : EXIT.failed;
    return { line: `error: ${error.message}`, code };
  }
  if (error instanceof TypeError && error.message === 'fetch failed') {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return { line: `error: cannot reach the control plane: ${cause?.code ?? cause?.message ?? 'fetch failed'}`, code: EXIT.unavailable };
  }
  return { line: `error: ${error instanceof Error ? error.message : String(error)}`, code: EXIT.failed };
}

/**
 * Text another party wrote (an agent's question, a reason quoting it), made safe for a terminal: control characters and
 * bidirectional overrides are shown as \u escapes, never obeyed. Tabs and newlines stay.
 */
export function terminalSafe(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
