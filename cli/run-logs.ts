import { ControlApiError, type ControlClient } from 'research-control-plane/client';
import { EXIT, terminalSafe, type Output } from './output.ts';
import type { Profile } from './profile.ts';

/**
 * `rcp runs logs <run_id> [--follow]` (docs/runs.md#following-a-run-live): the run's transcript, read in pages; with
 * --follow, then live from its event stream until the run is finished, reconnecting after a drop from the last entry
 * printed. Each entry is a line (its text's further lines indented), the agent's text made terminal-safe; --json
 * prints one JSON entry per line.
 */

interface Entry {
  seq: number;
  at: string;
  kind: string;
  tool: string | null;
  text: string;
}

const RECONNECT_MS = 2000;

function entryText(entry: Entry): string {
  const time = entry.at.slice(11, 19);
  const head = `${time}  ${entry.kind.padEnd(11)}${entry.tool ? ` ${terminalSafe(entry.tool)}` : ''}`;
  const [first = '', ...rest] = terminalSafe(entry.text).split('\n');
  return [`${head}  ${first}`, ...rest.map((line) => `    ${line}`)].join('\n');
}

export async function printRunLogs(rcp: ControlClient, profile: Profile, runId: string, options: { output: Output; follow: boolean }): Promise<number> {
  const { output } = options;
  const print = (entry: Entry) => output.out.write(`${output.json ? JSON.stringify(entry) : entryText(entry)}\n`);
  let after = 0;
  for (;;) {
    const page = await rcp.data(rcp.api.GET('/control/api/v1/runs/{run_id}/transcript', { params: { path: { run_id: runId }, query: { after, limit: 500 } } }));
    for (const entry of page.entries) print(entry);
    after = page.next_after;
    if (!page.has_more) break;
  }
  if (!options.follow) return EXIT.ok;
  for (;;) {
    const ended = await followStream(profile, runId, after, (entry) => {
      if (entry.seq <= after) return;
      after = entry.seq;
      print(entry);
    }).catch((error: unknown) => {
      if (error instanceof ControlApiError) throw error;
      output.err.write(`(the stream dropped: ${error instanceof Error ? error.message : String(error)}; reconnecting)\n`);
      return false;
    });
    if (ended) return EXIT.ok;
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
  }
}

/** Reads the run's event stream after `after`; true once the server said the run ended, false when the stream dropped. */
async function followStream(profile: Profile, runId: string, after: number, onEntry: (entry: Entry) => void): Promise<boolean> {
  const url = new URL(`/control/api/v1/runs/${encodeURIComponent(runId)}/transcript/stream`, profile.url);
  const response = await fetch(url, { headers: { authorization: `Bearer ${profile.token}`, accept: 'text/event-stream', 'last-event-id': String(after) } });
  if (!response.ok || !response.body) {
    const body = (await response.json().catch(() => null)) as { detail?: unknown } | null;
    throw new ControlApiError(response.status, (body?.detail as string | undefined) ?? response.statusText, response.headers.get('x-request-id'));
  }
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of response.body) {
    buffered += decoder.decode(chunk as Uint8Array, { stream: true });
    let boundary: number;
    while ((boundary = buffered.indexOf('\n\n')) !== -1) {
      const block = buffered.slice(0, boundary);
      buffered = buffered.slice(boundary + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event === 'entry' && data) onEntry(JSON.parse(data) as Entry);
      if (event === 'end') return true;
    }
  }
  return false;
}
