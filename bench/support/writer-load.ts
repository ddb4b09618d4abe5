import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Store } from '../../platform/store/store.ts';
import { stats, type Stats } from '../figures.ts';

/**
 * Writer load for the dispatch bench's (d): a hosted paper writer (OpenAI-compatible) that holds every request until
 * released, and completed runs with paper evidence for draft-next to draft. With DRAFTS draft-next calls under way, the
 * writer calls they make wait in the writer for as long as the measurement lasts.
 */
export class HeldWriter {
  readonly held: ServerResponse[] = [];
  private released = false;
  private readonly server: Server;
  readonly url: string;

  private constructor(server: Server, url: string) {
    this.server = server;
    this.url = url;
  }

  static async start(): Promise<HeldWriter> {
    let writer: HeldWriter;
    const server = createServer((request: IncomingMessage, response: ServerResponse) => {
      request.resume();
      request.on('end', () => (writer.released ? answerDraft(response) : writer.held.push(response)));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    writer = new HeldWriter(server, `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`);
    return writer;
  }

  /** Answers every held request with a draft, and every later one at once. */
  release(): void {
    this.released = true;
    for (const response of this.held.splice(0)) answerDraft(response);
  }

  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function answerDraft(response: ServerResponse): void {
  const markdown = ['# Bench draft', '', '## Abstract', '', 'Accuracy 0.9.', '', '## Method', '', 'Bench.', '', '## Results', '', 'Accuracy 0.9.', '', '## Decision', '', 'Positive.', '', '## Limitations', '', 'One run.', '', '## Reproducibility', '', 'See results.', ''].join('\n');
  const content = JSON.stringify({ title: 'Bench draft', abstract: 'Accuracy 0.9.', markdown });
  response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ choices: [{ message: { content } }] }));
}

/** `count` reconciled runs with complete paper evidence under `projectRoot`: draft-next candidates. */
export async function seedDraftCandidates(store: Store, projectRoot: string, count: number): Promise<void> {
  for (let index = 0; index < count; index++) {
    const projectId = `draft-${String(index).padStart(3, '0')}`;
    const runId = `${projectId}-20261122T1200${String(index % 60).padStart(2, '0')}Z`;
    await store.query(`INSERT INTO projects (project_id, project_name, project_dir, workload_class) VALUES ($1, $1, $1, 'unknown')`, [projectId]);
    await store.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, evidence, finished_at)
       VALUES ($1, $2, $3, 'reconciled', 'lane-00', 'http://127.0.0.1:9', 'unknown', 'bench', 'finalize_positive', $4::jsonb, now())`,
      [runId, projectId, `run:${runId}`, JSON.stringify({ run_notes: true, decision_file: true, results_json_files: 1, decision: 'finalize_positive', sufficient_for_paper: true })],
    );
    const dir = join(projectRoot, projectId);
    await mkdir(join(dir, '.research'), { recursive: true });
    await mkdir(join(dir, 'results', 'main'), { recursive: true });
    await writeFile(join(dir, 'run_notes.md'), '# Run notes\n');
    await writeFile(join(dir, '.research', 'decision.json'), JSON.stringify({ decision: 'finalize_positive', summary: 'positive' }));
    await writeFile(join(dir, 'results', 'main', 'metrics.json'), JSON.stringify({ accuracy: 0.9 }));
  }
}

export interface WriterLoadFigures {
  idle: Stats;
  loaded: Stats;
  /** Draft-next calls under way during the loaded measurement, and writer requests held meanwhile. */
  drafts: number;
  writerCallsHeld: number;
}

/**
 * Live dispatch answers idle, then with `drafts` draft-next calls under way against the held writer, in one run: the
 * same control plane, the same lanes, the same number of calls. `dispatchOnce` dispatches one item and answers its
 * round trip in milliseconds, once its lane is free again.
 */
export async function measureUnderWriterLoad(options: {
  calls: number;
  drafts: number;
  writer: HeldWriter;
  dispatchOnce: () => Promise<number>;
  draftNext: () => Promise<unknown>;
  writerCallsExpected: number;
  /** Paper workflows running now: the load is in place once every draft has one. */
  papersInFlight: () => Promise<number>;
}): Promise<WriterLoadFigures> {
  const idle: number[] = [];
  for (let index = 0; index < options.calls; index++) idle.push(await options.dispatchOnce());
  const drafting = Array.from({ length: options.drafts }, () => options.draftNext().catch((error: unknown) => error));
  const deadline = Date.now() + 60_000;
  const until = async (what: string, done: () => Promise<boolean>) => {
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`${what} not within 60 s`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  await until(`${options.writerCallsExpected} writer calls held`, async () => options.writer.held.length >= options.writerCallsExpected);
  await until(`${options.drafts} paper workflows running`, async () => (await options.papersInFlight()) >= options.drafts);
  const loaded: number[] = [];
  for (let index = 0; index < options.calls; index++) loaded.push(await options.dispatchOnce());
  const writerCallsHeld = options.writer.held.length;
  options.writer.release();
  await Promise.all(drafting);
  return { idle: stats(idle), loaded: stats(loaded), drafts: options.drafts, writerCallsHeld };
}
