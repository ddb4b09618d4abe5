import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { inject } from 'vitest';
import { loadWorkflowBundle } from '../../platform/temporal/workflow-bundle.ts';
import { quietTemporalLogs } from './temporal.ts';

/**
 * Workflow histories for replay tests. Histories captured from real runs are replayed against the current workflow
 * code: a change that would break runs already in flight fails with a non-determinism error.
 *
 * A fixture is added once and never re-captured: it is what earlier code recorded, which is exactly what a change must
 * still replay (docs/architecture.md#changing-a-workflow). Run a test that calls `maybeSaveHistory` with RCP_CAPTURE_HISTORIES=1 to
 * add the fixture of a new path; a file already there is left untouched.
 * They are stored as binary protobuf: the SDK's JSON conversion trips over the two protobufjs copies npm installs.
 */

type History = temporal.api.history.v1.IHistory;
const { History } = temporal.api.history.v1;
export const HISTORY_FIXTURES = fileURLToPath(new URL('../fixtures/histories', import.meta.url));
const EXTENSION = '.binpb';

export async function fetchRunHistory(workflowId: string): Promise<History> {
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  try {
    return await new Client({ connection }).workflow.getHandle(workflowId).fetchHistory();
  } finally {
    await connection.close();
  }
}

/** Replays one history against the current workflow bundle; throws on non-determinism. */
export async function replayHistory(history: History, workflowId: string): Promise<void> {
  quietTemporalLogs();
  await Worker.runReplayHistory({ workflowBundle: await loadWorkflowBundle() }, history, workflowId);
}

/** Adds a history as the fixture `name` when RCP_CAPTURE_HISTORIES=1 and no such fixture exists yet. */
export function maybeSaveHistory(name: string, history: History): void {
  if (process.env.RCP_CAPTURE_HISTORIES !== '1') return;
  const path = join(HISTORY_FIXTURES, `${name}${EXTENSION}`);
  if (existsSync(path)) return;
  writeFileSync(path, History.encode(history).finish());
}

/** The ids of the `patched()` markers a history holds: the patches whose new branch it took. */
export function patchMarkers(history: History): string[] {
  return (history.events ?? []).flatMap((event) => {
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_patch') return [];
    return (marker.details?.['patch-data']?.payloads ?? []).map((payload) => (JSON.parse(Buffer.from(payload.data ?? []).toString()) as { id: string }).id);
  });
}

export function storedHistories(): { name: string; history: History }[] {
  return readdirSync(HISTORY_FIXTURES)
    .filter((file) => file.endsWith(EXTENSION))
    .sort()
    .map((file) => ({ name: file.slice(0, -EXTENSION.length), history: History.decode(readFileSync(join(HISTORY_FIXTURES, file))) }));
}
