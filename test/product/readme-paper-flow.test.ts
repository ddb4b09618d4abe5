import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pinnedAgentBinary } from '../../worker-gate/launchers/installed-agents.ts';
import { FINISHED_STUDY, ResponsesServer } from '../../scripts/scripted-model-servers.ts';
import { waitUntil } from '../support/gate.ts';
import { testPort } from '../support/ports.ts';
import { ledgerReads, RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';
import { AGENT_DISPATCH_TIMEOUT_SEC } from '../support/agent-gates.ts';

/**
 * The flow of docs/papers.md#from-a-run-to-an-imported-paper, step by step through the control API, with Codex as the agent
 * against the scripted model that `npm run model:scripted` serves (docs/worker-gate.md#running-real-agents, trying it offline):
 * a candidate imported and promoted, a live dispatch, the real agent writing its evidence, the run completed, a
 * paper drafted, approved, packaged and its import recorded.
 */

// expected duration: ~60 s

let stack: RunStack;
let model: ResponsesServer;
const { queueItem } = ledgerReads(() => stack.store);
/** Every built-in workload profile waits as long as the fixture's default (30 s), with its thresholds. */
const QUICK_PROFILE = { idle_sustain_sec: 30, cpu_idle_threshold_pct: 100, gpu_idle_avg_threshold_pct: 100, gpu_idle_peak_threshold_pct: 100, vram_delta_threshold_mib: 1_000_000 };

beforeAll(async () => {
  if (!existsSync(pinnedAgentBinary('codex'))) throw new Error(`Codex CLI is not installed at ${pinnedAgentBinary('codex')}: run bash scripts/ensure-agents.sh (npm test's pretest does)`);
  model = await ResponsesServer.start(await testPort(), FINISHED_STUDY);
  stack = await startRunStack({
    gateOverrides: {
      agent_runtime: 'codex',
      dispatch_timeout_sec: AGENT_DISPATCH_TIMEOUT_SEC,
      workload_profiles: Object.fromEntries(['inference_eval', 'training', 'cpu_only', 'gpu_required'].map((name) => [name, QUICK_PROFILE])),
    },
    gateEnv: { OPENAI_BASE_URL: model.baseUrl, OPENAI_API_KEY: 'scripted' },
    // One machine, as in docs/papers.md#from-a-run-to-an-imported-paper: the control plane drafts from the project directories the gate's agents write.
    controlPlaneOverrides: (gate) => ({ dispatch_timeout_sec: AGENT_DISPATCH_TIMEOUT_SEC, project_root: gate.projectRoot }),
  });
}, RUN_STACK_START_MS);

afterAll(async () => {
  await stack?.close();
  await model?.down();
});

describe("the paper flow of the docs with Codex as the agent", () => {
  it('runs from an imported candidate to an imported paper', { timeout: 240_000 }, async () => {
    const api = async (path: string, body?: unknown) => {
      const answer = await stack.api(body === undefined ? 'GET' : 'POST', path, body);
      expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBeLessThan(300);
      return answer.body;
    };
    // 1. a candidate, promoted to the queue, and dispatched
    const imported = await api('/control/api/research/import-candidates', {
      requested_by: 'me',
      dry_run: false,
      candidates: [
        {
          title: 'Demo paper with a real agent',
          hypothesis: 'The method beats its baseline.',
          mechanism: 'A better method.',
          baseline_to_beat: 'The published baseline.',
          success_threshold: 'score above baseline',
          kill_condition: 'score below baseline',
          expected_artifacts: ['run_notes.md'],
          required_evidence: ['metrics'],
          estimated_runtime_class: 'minutes',
          expected_token_budget: 100_000,
          likely_failure_modes: ['none'],
          dedupe_key: 'demo-paper',
          novelty: 8,
          feasibility: 8,
          accessibility: 8,
          falsifiability: 8,
        },
      ],
    });
    const candidateId = imported.results[0]?.candidate_id;
    expect(candidateId, JSON.stringify(imported)).toEqual(expect.any(String));
    await api('/control/api/research/promote-candidate', { candidate_id: candidateId, dry_run: false, requested_by: 'me', idempotency_key: 'promote-demo' });
    const live = await api('/control/dispatch-next', { dry_run: false, requested_by: 'me' });
    expect(live).toMatchObject({ action: 'live_dispatch' });
    const projectId = live.candidate.project_id as string;

    // 2. the run completes (the gate's quiet window), then a paper is drafted
    await waitUntil('the run to complete', async () => ((await queueItem(projectId)).status === 'completed' ? true : undefined), 150_000, 1_000);
    expect(model.requests.length).toBe(FINISHED_STUDY.length);
    await api('/control/papers/draft-next', { dry_run: true, requested_by: 'me' });
    const drafted = await api('/control/papers/draft-next', { dry_run: false, requested_by: 'me' });
    const paperId = drafted.paper_id as string;
    expect(paperId, JSON.stringify(drafted)).toEqual(expect.any(String));

    // 3. a person approves, the package is written, the import recorded
    const automation = `/control/api/publication-automation/${encodeURIComponent(paperId)}`;
    await api(`${automation}/checklist/final_human_approval`, { idempotency_key: 'k1', requested_by: 'me', status: 'pass' });
    const packaged = await api(`${automation}/prepare-finalization-package`, { idempotency_key: 'k2', requested_by: 'me', target_label: 'demo' });
    await api(`${automation}/record-import`, { idempotency_key: 'k3', requested_by: 'me', corpus_repo: 'me/corpus', commit_sha: 'abc1234', manifest_sha256: packaged.manifest_sha256 });
    expect((await api('/control/api/status')).counts.paper_pipeline).toMatchObject({ published_imported: 1 });
  });
});
