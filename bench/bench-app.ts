import { createServer as createHttpServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import pino from 'pino';
import { createServer } from '../api/create-server.ts';
import { composeServices, routeDeps } from '../bin/compose.ts';
import { createLogger } from '../platform/observability/logger.ts';
import { SECRET_FIELDS } from '../platform/config/schema.ts';
import { ServiceMetrics } from '../platform/http/metrics.ts';
import { NO_ROUTING, AGENT_DEFAULTS, type DispatchSettings } from '../capabilities/runs/dispatch-settings.ts';
import type { ProviderBatchSettings } from '../capabilities/research/provider-batch.ts';
import { ServiceSecrets } from '../platform/config/service-secrets.ts';
import type { Store } from '../platform/store/store.ts';

/** Prints the `listening <port>` line bench/support.ts startBenchServer waits for. */
export function announce(server: Server): void {
  const address = server.address();
  console.log(`listening ${typeof address === 'object' && address ? address.port : 0}`);
}

const noTemporal = () => Promise.reject(new Error('the benchmark server has no Temporal connection'));

/**
 * The real app on a loopback port, for the app side of an HTTP bench: the production logger at its default level
 * writing where nothing reads it, and no Temporal connection (the reads benched never reach it).
 */
export async function startBenchApp(
  store: Store,
  token: string,
  options: { dispatch?: DispatchSettings; stateDir?: string; projectRoot?: string; researchProvider?: ProviderBatchSettings } = {},
): Promise<void> {
  const logger = createLogger({ level: 'info', secretConfigFields: SECRET_FIELDS, destination: pino.destination('/dev/null') });
  const services = composeServices({
    store,
    settings: {
      defaultWorkloadClass: 'inference_eval',
      dispatch: options.dispatch ?? { liveDispatchEnabled: false, routing: NO_ROUTING, completionCallbackToken: token, dispatchTimeoutSec: 30, maxWaitAfterIdleSec: 60, agent: AGENT_DEFAULTS },
      papers: {
        stateDir: options.stateDir ?? tmpdir(),
        projectRoot: options.projectRoot ?? tmpdir(),
        writer: { provider: 'deterministic', hosted: null, fallback: true },
        evidenceSync: null,
        // As a config gives them: the draft-next dry run searches the evidence for the service's token.
        secrets: ServiceSecrets.of([{ name: 'control_api_bearer_token', value: token }]),
      },
      researchProvider: options.researchProvider ?? { provider: null, missing: ['research_provider_base_url'], limits: { minRemainingCredits: 5, requestReserve: 10 } },
      alerts: { hangAfterSec: 3600, cooldownSec: 1800, push: null, webhook: null },
      core: { mode: 'shadow', enforceEnabled: false },
      pump: { enabled: false, followupLaunch: false, paperDraft: false },
    },
    launchers: {
      runs: { startRun: noTemporal, deliverCallback: noTemporal, deliverAnswer: noTemporal, deliverResumeNow: noTemporal, cancelRun: noTemporal, workflowUiUrl: () => null },
      papers: { startStep: noTemporal, stepResult: noTemporal, runRewriteBatch: noTemporal, runDraftNext: noTemporal, stepWorkflowStatus: noTemporal },
      cycles: { startCycle: noTemporal, cycleProgress: noTemporal },
    },
  });
  const app = await createServer(
    routeDeps(services, { controlApiToken: token, sessionCookieSecure: false, dbPath: store.location, metrics: new ServiceMetrics(), legacyNotesApiEnabled: false }),
    logger,
  );
  await app.listen({ host: '127.0.0.1', port: 0 });
  announce(app.server);
}

/**
 * The bare side of an HTTP bench: `answer` gives the JSON body for a request's URL, or undefined for 404. No
 * validation, authentication or framework: what is left is the read itself.
 */
export function startBareServer(answer: (url: URL) => Promise<unknown>): void {
  const server = createHttpServer(async (request, response) => {
    const body = await answer(new URL(request.url ?? '/', 'http://bench'));
    response.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' });
    response.end(body === undefined ? '{"error":"not found"}' : JSON.stringify(body));
  });
  server.listen(0, '127.0.0.1', () => announce(server));
}
