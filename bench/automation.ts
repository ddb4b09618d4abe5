/**
 * Research automation benchmark, in process on a fresh Postgres database:
 *   (1) a live provider batch against a local OpenAI-compatible provider that answers at once: the whole call (quota
 *       read, one chat/completions request, validation, planning, the ledger writes), and the dry run (quota only).
 *   (2) a queue pump tick that finds nothing to do, the steady state of a pump running every minute: its gate,
 *       the dispatch selection, a follow-up launch and the draft-next plan (all on), over 10k finished queue items and
 *       runs.
 *   (3) a dry queue check over the same ledgers with 100 findings.
 * The provider's own time is ~0, so (1) is what the control plane adds to a provider's latency.
 *   npm run bench:automation
 * Knobs (environment): BENCH_BATCHES=200 BENCH_TICKS=500 BENCH_CHECKS=200 BENCH_ITEMS=10000 (BENCH_QUICK=1: small
 *   counts, seconds; bench/knobs.ts)
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AGENT_DEFAULTS, NO_ROUTING } from '../capabilities/runs/dispatch-settings.ts';
import { generateProviderBatch, type ProviderBatchSettings } from '../capabilities/research/provider-batch.ts';
import { runQueueCheck } from '../capabilities/automation/queue-alerts.ts';
import { pumpFollowup, pumpGate, pumpPlanPaperDraft, pumpSelectDispatch, type PumpDeps } from '../capabilities/automation/queue-pump.ts';
import { composeServices } from '../bin/compose.ts';
import { ServiceSecrets } from '../platform/config/service-secrets.ts';
import { openStore } from '../platform/store/open-store.ts';
import { log, loadNow, ms, timeEach, type Stats } from './figures.ts';
import { knob } from './knobs.ts';
import { benchDatabaseUrl, dropDatabase, percentileTable, recreateDatabase } from './support.ts';

const BATCHES = knob('BENCH_BATCHES', 200, 10);
const TICKS = knob('BENCH_TICKS', 500, 20);
const CHECKS = knob('BENCH_CHECKS', 200, 10);
const ITEMS = knob('BENCH_ITEMS', 10_000, 200);
const DATABASE = `rcp_bench_automation_${process.pid}`;
const loadStart = loadNow();

const row = (measure: string, figures: Stats) => ({ measure, calls: String(figures.n), 'p50 ms': ms(figures.p50), 'p99 ms': ms(figures.p99), 'mean ms': ms(figures.mean), 'max ms': ms(figures.max) });

/** Two complete candidates per request, each with text of its own, so the planner admits them rather than merging. */
let served = 0;
function candidates() {
  return [0, 1].map((offset) => {
    const n = served * 2 + offset;
    return {
      title: `Bench candidate ${n}`,
      generation_mode: 'implementation_gap',
      hypothesis: `Variant ${n} of a ${['quantised', 'sparse', 'paged', 'fused'][n % 4]} kernel keeps throughput ${n} on small cards.`,
      mechanism: `Mechanism ${n}: replace block ${n % 97} with a ${['lookup', 'streamed', 'tiled'][n % 3]} path.`,
      baseline_to_beat: 'the stock kernel',
      success_threshold: 'throughput within 5 %',
      kill_condition: 'throughput drops by 20 %',
      expected_artifacts: ['run_notes.md'],
      required_evidence: ['three seeds'],
      estimated_runtime_class: 'hours',
      likely_failure_modes: ['memory bound'],
      dedupe_key: `bench-candidate-${n}`,
      novelty: 8,
      feasibility: 8,
      accessibility: 8,
      falsifiability: 8,
    };
  });
}

async function startProvider(): Promise<{ origin: string; close: () => Promise<void> }> {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      if (request.url === '/quota') {
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ remaining_credits: 1e9, window: { limit: 1e9, remaining: 1e9, resets_at: '2030-01-01T00:00:00Z' } }));
        return;
      }
      const content = JSON.stringify({ candidates: candidates() });
      served += 1;
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ choices: [{ message: { role: 'assistant', content } }], usage: { prompt_tokens: 900, completion_tokens: 400, total_tokens: 1300, cost: 0.004 } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function main(): Promise<void> {
  await recreateDatabase(DATABASE);
  const store = await openStore({ backend: 'pg', pgDatabaseUrl: benchDatabaseUrl(DATABASE) });
  const provider = await startProvider();
  try {
    const researchProvider: ProviderBatchSettings = {
      provider: { base_url: `${provider.origin}/v1`, model: 'bench-model', quota_url: `${provider.origin}/quota`, api_key: 'bench-key-0123456789', timeout_ms: 10_000 },
      missing: [],
      limits: { minRemainingCredits: 5, requestReserve: 10 },
    };
    const unreachable = () => Promise.reject(new Error('the bench has no Temporal connection'));
    const services = composeServices({
      store,
      settings: {
        defaultWorkloadClass: 'unknown',
        dispatch: { liveDispatchEnabled: true, routing: NO_ROUTING, completionCallbackToken: 'bench-callback-token-0123', dispatchTimeoutSec: 30, maxWaitAfterIdleSec: 60, agent: AGENT_DEFAULTS },
        papers: { stateDir: '/tmp', projectRoot: '/tmp', writer: { provider: 'deterministic', hosted: null, fallback: true }, evidenceSync: null, secrets: ServiceSecrets.none },
        researchProvider,
        alerts: { hangAfterSec: 3600, cooldownSec: 1800, push: null, webhook: null },
        core: { mode: 'shadow', enforceEnabled: false },
        pump: { enabled: true, followupLaunch: true, paperDraft: true },
      },
      launchers: {
        runs: { startRun: unreachable, deliverCallback: unreachable, deliverAnswer: unreachable, deliverResumeNow: unreachable, cancelRun: unreachable, workflowUiUrl: () => null },
        papers: { startStep: unreachable, stepResult: unreachable, runRewriteBatch: unreachable, runDraftNext: unreachable, stepWorkflowStatus: unreachable },
        cycles: { startCycle: unreachable, cycleProgress: unreachable },
      },
    });
    const deps = { store, facility: services.facility, settings: researchProvider };

    log(`(1) ${BATCHES} live provider batches of 2 candidates, and ${BATCHES} dry runs`);
    let key = 0;
    const live = await timeEach(BATCHES, () => generateProviderBatch(deps, { dry_run: false, requested_by: 'bench', count: 2, idempotency_key: `bench-${key++}` }));
    const dry = await timeEach(BATCHES, () => generateProviderBatch(deps, { dry_run: true, requested_by: 'bench', count: 2 }));

    log(`seeding ${ITEMS} finished queue items and runs, and 100 items waiting for a person`);
    await store.query(
      `INSERT INTO projects (project_id, project_name, project_dir, workload_class)
         SELECT 'p' || n, 'Project ' || n, 'p' || n, 'unknown' FROM generate_series(1, $1) AS n;
       INSERT INTO queue_items (project_id, project_name, status, workload_class)
         SELECT 'p' || n, 'Project ' || n, CASE WHEN n <= 100 THEN 'needs_review' ELSE 'completed' END, 'unknown' FROM generate_series(1, $1) AS n;`.replaceAll('$1', String(ITEMS)),
    );
    await store.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, finished_at)
         SELECT 'p' || n || '-20260101T000000Z', 'p' || n, 'run:p' || n, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'bench',
                'finalize_positive', now() - (n || ' minutes')::interval
           FROM generate_series(101, ${ITEMS}) AS n`,
    );
    await store.query('ANALYZE');

    const pump: PumpDeps = services;
    log(`(2) ${TICKS} idle pump ticks`);
    let tick = 0;
    const ticks = await timeEach(TICKS, async () => {
      const id = `bench-tick-${tick++}`;
      await pumpGate(pump);
      await pumpSelectDispatch(pump);
      await pumpFollowup(pump, id);
      await pumpPlanPaperDraft(pump);
    });

    log(`(3) ${CHECKS} dry queue checks (100 findings)`);
    const checks = await timeEach(CHECKS, () => runQueueCheck(services, { dry_run: true, force_notify: false, trigger: 'api' }));

    console.log(
      percentileTable([
        row('(1) provider batch, live (2 candidates)', live),
        row('(1) provider batch, dry run', dry),
        row('(2) pump tick with nothing to do', ticks),
        row('(3) queue check, dry, 100 findings', checks),
      ]),
    );
    console.log(`load average at start ${loadStart}, at end ${loadNow()}; ${ITEMS} queue items`);
  } finally {
    await provider.close();
    await store.close();
    await dropDatabase(DATABASE);
  }
}

await main();
