import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LaunchedRuntime } from '../../worker-gate/contract/agent-runtimes.ts';
import { pinnedAgentBinary } from '../../worker-gate/launchers/installed-agents.ts';
import { AGENT_DISPATCH_TIMEOUT_SEC, EVIDENCE } from '../support/agent-gates.ts';
import { gateClient, waitUntil } from '../support/gate.ts';
import { MessagesServer, ResponsesServer, type ModelStep } from '../../scripts/scripted-model-servers.ts';
import { testPort } from '../support/ports.ts';
import { gateTarget, ledgerReads, RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';

/**
 * Each real tool through the whole product: a queued item, a live dispatch-next on the control plane, the run
 * workflow, the real gate process, the real agent against its scripted model server, its hooks, the quiet window,
 * the finishing callback and the run's end state, decision and token usage in the ledgers and the v1 run list. One gate
 * serves both: Codex by default, Claude Code for the inference_eval workload class.
 */

// expected duration: ~100 s

const WINDOW_MS = 90_000;

let stack: RunStack;
let responses: ResponsesServer;
let messages: MessagesServer;
const { queueItem, runRow } = ledgerReads(() => stack.store);

beforeAll(async () => {
  for (const runtime of ['codex', 'claude-code'] as const) {
    if (!existsSync(pinnedAgentBinary(runtime))) throw new Error(`${runtime} is not installed at ${pinnedAgentBinary(runtime)}: run bash scripts/ensure-agents.sh (npm test's pretest does)`);
  }
  [responses, messages] = await Promise.all([ResponsesServer.start(await testPort()), MessagesServer.start(await testPort())]);
  stack = await startRunStack({
    defaultLane: false,
    gateOverrides: {
      agent_runtime: 'codex',
      agent_runtime_by_workload_class: { inference_eval: 'claude-code' },
      // The built-in inference_eval profile waits 300 s of quiet; this test's agents stop at once. The fixture's
      // thresholds (100 % CPU counts as idle) stay, as for every other class here.
      workload_profiles: { inference_eval: { idle_sustain_sec: 30, cpu_idle_threshold_pct: 100, gpu_idle_avg_threshold_pct: 100, gpu_idle_peak_threshold_pct: 100, vram_delta_threshold_mib: 1_000_000 } },
      dispatch_timeout_sec: AGENT_DISPATCH_TIMEOUT_SEC,
    },
    gateEnv: { OPENAI_BASE_URL: responses.baseUrl, OPENAI_API_KEY: 'sk-scripted-0123456789', ANTHROPIC_BASE_URL: messages.baseUrl, ANTHROPIC_API_KEY: 'sk-ant-scripted-0123456789' },
    controlPlaneOverrides: (gate) => ({ dispatch_timeout_sec: AGENT_DISPATCH_TIMEOUT_SEC, worker_targets: { codexLane: gateTarget(gate), claudeLane: gateTarget(gate) } }),
  });
}, RUN_STACK_START_MS);

afterAll(async () => {
  await stack?.close();
  await Promise.all([responses?.down(), messages?.down()]);
});

const writeEvidence: ModelStep[] = EVIDENCE.map(({ path, content }) => ({ kind: 'write', path, content }));

const cases: { runtime: LaunchedRuntime; key: string; lane: string; workloadClass: string; model: () => ResponsesServer | MessagesServer }[] = [
  { runtime: 'codex', key: 'path-codex', lane: 'codexLane', workloadClass: 'unknown', model: () => responses },
  { runtime: 'claude-code', key: 'path-claude', lane: 'claudeLane', workloadClass: 'inference_eval', model: () => messages },
];

describe('a real agent through the whole product path', () => {
  it.each(cases)('$runtime: dispatch-next → gate → agent → hooks → quiet window → callback → the run completes with its decision', { timeout: WINDOW_MS + 60_000 }, async ({ key, lane, workloadClass, model }) => {
    model().script(key, [...writeEvidence, { kind: 'message', text: 'The study is done.' }]);
    // The prompt the control plane writes carries the project's name: the scripted model finds the key there.
    await stack.seed(key, { projectName: `Study [${key}]`, lane, scenario: {} });
    await stack.store.query('UPDATE queue_items SET workload_class = $2 WHERE project_id = $1', [key, workloadClass]);
    await stack.store.query('UPDATE projects SET workload_class = $2 WHERE project_id = $1', [key, workloadClass]);

    const live = await stack.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'agent-path-test' });
    expect(live.status, JSON.stringify(live.body)).toBe(200);
    expect(live.body).toMatchObject({ action: 'live_dispatch', candidate: { project_id: key } });
    const runId = live.body.run_id as string;

    try {
      await waitUntil('the item to complete', async () => ((await queueItem(key)).status === 'completed' ? true : undefined), WINDOW_MS + 30_000, 500);
    } catch (error) {
      const gateRun = await gateClient(stack.gateFixture).runView(runId);
      throw new Error(`${(error as Error).message}\nrun: ${JSON.stringify(await runRow(runId))}\nthe gate's run: ${JSON.stringify(gateRun)}\nmodel requests: ${model().requestsOf(key).length}`);
    }
    expect(await runRow(runId)).toMatchObject({ state: 'reconciled', decision: 'finalize_positive' });
    const listed = await stack.api('GET', `/control/api/v1/runs?project=${key}`);
    expect(listed.body.items[0].token_usage).toMatchObject({ total_tokens: expect.any(Number) });
    expect(listed.body.items[0].token_usage.total_tokens).toBeGreaterThan(0);
    expect(model().requestsOf(key).length).toBe(writeEvidence.length + 1);
  });
});
