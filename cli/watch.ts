import type { ControlClient } from 'research-control-plane/client';
import { colours, EXIT, type Output } from './output.ts';

/**
 * Follows a run until it finishes. On a terminal, one line updated in place: its state, the gate's state, the quiet
 * window's progress (quiet samples of those needed), why it still waits (a question waits on the operator) and the
 * time since it started; elsewhere (or
 * with --json) a line for each change of state or of the window's verdict. Then its decision. The exit code says whether it completed (the run's state `reconciled`).
 */
export async function watchRun(rcp: ControlClient, runId: string, options: { output: Output; intervalMs: number }): Promise<number> {
  const { output } = options;
  const live = output.out.isTTY === true && !output.json;
  const c = colours(output.out);
  let shown = '';
  for (;;) {
    const detail = await rcp.data(rcp.api.GET('/control/api/v1/runs/{run_id}', { params: { path: { run_id: runId }, query: { event_limit: 1 } } }));
    const gate = detail.finished ? null : await gateView(rcp, runId);
    const gateState = gate?.gate_state ?? detail.callbacks[0]?.gate_state ?? null;
    const window = gate?.quiet_window;
    const quiet = window
      ? { samples: window.samples_in_window, needed: window.samples_needed, verdict: window.verdict, reasons: window.reasons, waiting_s: window.waiting_sec, overdue: window.overdue }
      : null;
    const view = { run_id: runId, state: detail.run.state, gate_state: gateState, quiet_window: quiet, elapsed_s: elapsedSeconds(detail.run.created_at, detail.run.finished_at), finished: detail.finished };
    // A run waiting on its agent's question waits on the operator: the line says so, and how to answer. One waiting out
    // a usage limit says when it resumes, and how to resume it now.
    const asks = detail.run.state === 'question_pending' ? `  ${c.red('waits on your answer')}: rcp runs question ${runId}` : limitWait(detail.run.usage_limit, runId);
    const line = `run ${runId}  ${c.bold(view.state)}  gate ${gateState ?? '-'}${quiet ? `  ${describeWindow(quiet, c)}` : ''}${asks}  ${formatElapsed(view.elapsed_s)}`;
    const key = `${view.state}/${view.gate_state}/${quiet?.verdict ?? ''}/${quiet?.overdue ?? ''}`;
    if (live) output.out.write(`\r\u001b[2K${line}`);
    else if (key !== shown) output.out.write(`${output.json ? JSON.stringify(view) : line}\n`);
    shown = key;
    if (detail.finished) {
      const completed = detail.run.state === 'reconciled';
      const ending = { ...view, decision: detail.run.decision, decision_summary: detail.run.decision_summary, last_error: detail.run.last_error, completed };
      if (live) output.out.write('\n');
      const verdict = completed ? c.green('completed') : c.red(`ended ${detail.run.state}`);
      output.out.write(`${output.json ? JSON.stringify(ending) : `${verdict}: decision ${detail.run.decision ?? 'none'}${detail.run.last_error ? ` (${detail.run.last_error})` : ''}`}\n`);
      return completed ? EXIT.ok : EXIT.failed;
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs));
  }
}

/** "quiet 12/30", then why it waits: "waiting: mean CPU 63% above threshold 20%", and whether a person should look. */
function describeWindow(
  quiet: { samples: number; needed: number; verdict: string | null; reasons: string[]; overdue: boolean },
  c: ReturnType<typeof colours>,
): string {
  const progress = `quiet ${quiet.samples}/${quiet.needed}`;
  if (quiet.verdict === 'ready' || quiet.reasons.length === 0) return progress;
  const why = `${progress}  waiting: ${quiet.reasons.join('; ')}`;
  return quiet.overdue ? `${c.red(why)} (far longer than the window: needs a person)` : why;
}

function elapsedSeconds(createdAt: string, finishedAt: string | null): number {
  const end = finishedAt ? Date.parse(finishedAt) : Date.now();
  return Math.max(0, Math.round((end - Date.parse(createdAt)) / 1000));
}

function formatElapsed(seconds: number): string {
  const m = Math.floor(seconds / 60);
  return m > 0 ? `${m}m${String(seconds % 60).padStart(2, '0')}s` : `${seconds}s`;
}

/** The gate's live view of the run; null when the gate cannot be asked (the line then shows the last callback's state). */
async function gateView(rcp: ControlClient, runId: string) {
  const { data } = await rcp.api.GET('/control/api/v1/runs/{run_id}/gate', { params: { path: { run_id: runId } } });
  return data ?? null;
}

/** For a run waiting out the model's usage limit: when it resumes, and how to resume it now. */
function limitWait(usageLimit: { resumes_at: string } | null, runId: string): string {
  return usageLimit ? `  usage limit: resumes at ${usageLimit.resumes_at} (now: rcp runs resume ${runId})` : '';
}
