import { createServer, type Server } from 'node:http';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { insertProject } from '../../capabilities/runs/projects.ts';
import type { RunStack } from './run-stack.ts';

/** The numbers of a seeded run's results, and of the drafts SlowWriter writes. */
export const WRITER_RESULTS = { accuracy: 0.934, loss: 0.208 };

/** A hosted paper writer (OpenAI-compatible) that answers after `delayMs`, with a draft whose numbers are WRITER_RESULTS. */
export class SlowWriter {
  delayMs = 0;
  requests = 0;
  /** Requests being written now: asked, not yet answered. */
  writing = 0;
  /** Runs while a request is being answered, before the answer. */
  whileWriting: (() => Promise<void>) | null = null;
  readonly server: Server;
  readonly url: string;

  private constructor(server: Server, url: string) {
    this.server = server;
    this.url = url;
  }

  static async start(): Promise<SlowWriter> {
    let writer: SlowWriter;
    const server = createServer((request, response) => {
      writer.requests += 1;
      writer.writing += 1;
      request.resume();
      request.on('end', async () => {
        await writer.whileWriting?.();
        setTimeout(() => {
          writer.writing -= 1;
          const { accuracy, loss } = WRITER_RESULTS;
          const markdown = ['# A positive pipeline result', '', '## Abstract', '', `Accuracy reached ${accuracy} at a loss of ${loss} in this run of the pipeline test.`, '',
            '## Method', '', 'A fake agent.', '', '## Results', '', `Accuracy ${accuracy}, loss ${loss}.`, '', '## Decision', '', 'Positive.', '',
            '## Limitations', '', 'One run.', '', '## Reproducibility', '', 'See `results/main/metrics.json`.', ''].join('\n');
          const content = JSON.stringify({ title: 'A positive pipeline result', abstract: `Accuracy reached ${accuracy} at a loss of ${loss} in this run of the pipeline test.`, markdown });
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ choices: [{ message: { content } }] }));
        }, writer.delayMs);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    writer = new SlowWriter(server, `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`);
    return writer;
  }

  /** Control-plane config fields that make this the paper writer. */
  config(): Record<string, unknown> {
    return { paper_writer_provider: 'openai_compatible', paper_writer_base_url: this.url, paper_writer_model: 'pipeline-model', paper_writer_timeout_sec: 60 };
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * A reconciled run with complete evidence in its project, as a gate would have left it; no gate involved. The control
 * plane must read evidence from the gate's project root (`project_root: gate.projectRoot`).
 */
export async function seedCompletedRun(stack: RunStack, projectId: string): Promise<{ runId: string; dir: string }> {
  const runId = `${projectId}-20261122T120000Z`;
  await stack.store.transaction(async (tx) => {
    await insertProject(tx, { project_id: projectId, project_name: projectId, project_dir: projectId, workload_class: 'unknown' });
    await tx.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, evidence, finished_at)
       VALUES ($1, $2, $3, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'test', 'finalize_positive', $4::jsonb, now())`,
      [runId, projectId, `run:${runId}`, JSON.stringify({ run_notes: true, decision_file: true, results_json_files: 1, decision: 'finalize_positive', sufficient_for_paper: true })],
    );
  });
  const dir = join(stack.gateFixture.projectRoot, projectId);
  await mkdir(join(dir, '.research'), { recursive: true });
  await mkdir(join(dir, 'results', 'main'), { recursive: true });
  await writeFile(join(dir, 'run_notes.md'), '# Run notes\n');
  await writeFile(join(dir, '.research', 'decision.json'), JSON.stringify({ decision: 'finalize_positive', summary: 'positive' }));
  await writeFile(join(dir, 'results', 'main', 'metrics.json'), JSON.stringify(WRITER_RESULTS));
  return { runId, dir };
}
