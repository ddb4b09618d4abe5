import type { PaperLauncher } from '../../capabilities/papers/paper-launcher.ts';
import type { ProviderBatchSettings } from '../../capabilities/research/provider-batch.ts';
import { CycleNotStartedError } from '../../capabilities/automation/cycle-launcher.ts';
import { deterministicPaperSettings } from './paper-settings.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../api/deps.ts';
import { NO_ROUTING, AGENT_DEFAULTS, type DispatchSettings } from '../../capabilities/runs/dispatch-settings.ts';
import type { RunLauncher } from '../../capabilities/runs/run-launcher.ts';
import { createServer, type CreateServerOptions, type RegisteredRoute } from '../../api/create-server.ts';
import { createLogger } from '../../platform/observability/logger.ts';
import { ConfigFileSchema, SECRET_FIELDS } from '../../platform/config/schema.ts';
import { WorkerGate } from '../../worker-gate/worker-gate.ts';
import { openStore } from '../../platform/store/open-store.ts';
import type { Store } from '../../platform/store/store.ts';
import { createTestDatabase } from './database.ts';
import { ServiceMetrics } from '../../platform/http/metrics.ts';
import { composeServices, routeDeps, type Launchers, type ServiceSettings } from '../../bin/compose.ts';

export const TEST_TOKEN = 'test-control-token-0123456789abcdef';
export const TEST_GATE_TOKEN = 'test-gate-token-0123456789abcdef';

/** Every log line the app wrote, as raw text, so tests can assert what never reaches the logs. */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _encoding: string, done: () => void) {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }
  get text() {
    return this.lines.join('\n');
  }
}

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  databaseUrl: string;
  logs: LogCapture;
  routes: RegisteredRoute[];
  auth: { authorization: string };
  close(): Promise<void>;
}

/** Dispatch settings of an install with no worker targets and live dispatch off. */
export const NO_WORKERS: DispatchSettings = {
  liveDispatchEnabled: false,
  routing: NO_ROUTING,
  completionCallbackToken: 'test-callback-token-0123456789ab',
  dispatchTimeoutSec: 30,
  maxWaitAfterIdleSec: 60,
  agent: AGENT_DEFAULTS,
};

/** Stands in for Temporal in tests of the HTTP layer alone: every workflow call fails as an unreachable server would. */
export const UNREACHABLE_TEMPORAL: RunLauncher = {
  startRun: () => Promise.reject(new Error('this test app has no Temporal connection')),
  deliverCallback: () => Promise.reject(new Error('this test app has no Temporal connection')),
  deliverAnswer: () => Promise.reject(new Error('this test app has no Temporal connection')),
  deliverResumeNow: () => Promise.reject(new Error('this test app has no Temporal connection')),
  cancelRun: () => Promise.reject(new Error('this test app has no Temporal connection')),
  workflowUiUrl: () => null,
};

/** Paper workflows in tests of the HTTP layer alone: every call fails as an unreachable Temporal would. */
export const UNREACHABLE_PAPER_WORKFLOWS: PaperLauncher = {
  startStep: () => Promise.reject(new Error('this test app has no Temporal connection')),
  stepResult: () => Promise.reject(new Error('this test app has no Temporal connection')),
  runRewriteBatch: () => Promise.reject(new Error('this test app has no Temporal connection')),
  runDraftNext: () => Promise.reject(new Error('this test app has no Temporal connection')),
  stepWorkflowStatus: () => Promise.reject(new Error('this test app has no Temporal connection')),
};

/** An install that configured no research provider: provider generation is refused with the fields to set. */
export const NO_RESEARCH_PROVIDER: ProviderBatchSettings = {
  provider: null,
  missing: ['research_provider_base_url', 'research_provider_model', 'research_provider_quota_url'],
  limits: { minRemainingCredits: 5, requestReserve: 10 },
};

/** Workflow clients in tests of the HTTP layer alone: every call fails as an unreachable Temporal would. */
export const UNREACHABLE_LAUNCHERS: Launchers = {
  runs: UNREACHABLE_TEMPORAL,
  papers: UNREACHABLE_PAPER_WORKFLOWS,
  cycles: {
    startCycle: () => Promise.reject(new CycleNotStartedError('this test app has no Temporal connection')),
    cycleProgress: () => Promise.reject(new Error('this test app has no Temporal connection')),
  },
};

/** The settings a test install's config would give: no workers, no provider, no alert channels. */
export function testServiceSettings(): ServiceSettings {
  return {
    defaultWorkloadClass: 'inference_eval',
    dispatch: NO_WORKERS,
    papers: deterministicPaperSettings(),
    researchProvider: NO_RESEARCH_PROVIDER,
    alerts: { hangAfterSec: 3600, cooldownSec: 1800, push: null, webhook: null },
    core: { mode: 'shadow', enforceEnabled: false },
    pump: { enabled: false, followupLaunch: false, paperDraft: false },
  };
}

/**
 * The deps of the HTTP layer alone on `store`, from the composition root: no workers, no Temporal. A service in
 * `overrides` replaces the root's; the rest (the Research Facility among them) are built on the overridden ones.
 */
export function httpOnlyDeps(store: Store, overrides: Partial<AppDeps> = {}): AppDeps {
  const services = composeServices({ store, settings: testServiceSettings(), launchers: UNREACHABLE_LAUNCHERS }, overrides);
  return {
    ...routeDeps(services, {
      controlApiToken: TEST_TOKEN,
      sessionCookieSecure: false,
      dbPath: store.location,
      metrics: new ServiceMetrics(),
      legacyNotesApiEnabled: false,
    }),
    ...overrides,
  };
}

/** A worker gate on a temporary state directory, for serving both roles from one test server. */
async function startTestGate(logger: ReturnType<typeof createLogger>) {
  const dir = mkdtempSync(join(tmpdir(), 'rcp-test-gate-'));
  const config = ConfigFileSchema.parse({
    roles: ['control_plane', 'worker_gate'],
    control_api_bearer_token: TEST_TOKEN,
    worker_wake_gate_bearer_token: TEST_GATE_TOKEN,
    completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
    completion_callback_token: 'test-callback-token-0123456789ab',
    state_dir: join(dir, 'state'),
    project_root: join(dir, 'projects'),
    dispatch_script_path: join(dir, 'agent.sh'),
  });
  const gate = new WorkerGate({ config, logger, eventUrl: () => 'http://127.0.0.1:9/legacy-agent/event' });
  await gate.start();
  return {
    gate,
    async close() {
      await gate.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The real HTTP app on a fresh cloned Postgres database; no Temporal connection unless deps say so.
 * With `workerGate` the same server also serves the worker gate role, as a single-machine install does.
 */
export async function startTestApp(
  overrides: Partial<AppDeps> = {},
  options: {
    workerGate?: boolean;
    allowedHosts?: string[];
    server?: Pick<CreateServerOptions, 'routeObservability' | 'memoryWarnRssMib' | 'limits'>;
    /** 'debug' unless given: a test sending thousands of requests keeps only what matters in memory. */
    logLevel?: string;
    readStatementTimeoutMs?: number;
    /** Another replica of `replicaOf`: the same database (not dropped on close), its own process state. */
    replicaOf?: TestApp;
  } = {},
): Promise<TestApp> {
  const database = options.replicaOf ? null : await createTestDatabase();
  const pgDatabaseUrl = options.replicaOf ? options.replicaOf.databaseUrl : database!.url;
  const store = await openStore({
    backend: 'pg',
    pgDatabaseUrl,
    ...(options.readStatementTimeoutMs !== undefined ? { readStatementTimeoutMs: options.readStatementTimeoutMs } : {}),
  });
  const logs = new LogCapture();
  const logger = createLogger({ level: options.logLevel ?? 'debug', secretConfigFields: SECRET_FIELDS, destination: logs });
  const routes: RegisteredRoute[] = [];
  const testGate = options.workerGate ? await startTestGate(logger) : undefined;
  const app = await createServer(
    httpOnlyDeps(store, { ...(testGate ? { workerGateReady: () => testGate.gate.isReady() } : {}), ...overrides }),
    logger,
    {
      onRoute: (route) => routes.push(route),
      checkAnswers: true,
      ...(testGate ? { workerGate: { gate: testGate.gate, token: TEST_GATE_TOKEN } } : {}),
      ...(options.allowedHosts ? { allowedHosts: options.allowedHosts } : {}),
      ...options.server,
    },
  );
  return {
    app,
    store,
    databaseUrl: pgDatabaseUrl,
    logs,
    routes,
    auth: { authorization: `Bearer ${TEST_TOKEN}` },
    async close() {
      await app.close();
      await testGate?.close();
      await store.close();
      await database?.drop();
    },
  };
}
