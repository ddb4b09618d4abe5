import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { WorkerGateRole } from '../api/app.ts';
import { createWorkerGateServer } from '../api/create-server.ts';
import type { Config } from '../platform/config/schema.ts';
import { WorkerGate } from '../worker-gate/worker-gate.ts';
import { browsableHost } from '../platform/http/browsable-host.ts';
import { checkAnswersFromEnvironment, httpLimitsFrom } from './http-limits.ts';
import { operationalTraceFrom } from '../platform/observability/operational-trace-setup.ts';
import { routeObservabilityFrom } from '../platform/observability/route-observability-setup.ts';

/** Agents run on the gate's machine, so they reach its event hook over loopback whatever address it binds. */
export function agentEventUrl(listenHost: string, port: number): string {
  return `http://${browsableHost(listenHost)}:${port}/legacy-agent/event`;
}

/** The worker gate role before its server listens: the event URL is filled in once the port is known. */
export function createWorkerGateRole(config: Config, logger: Logger): { role: WorkerGateRole; bindPort(port: number): void } {
  let eventUrl: string | undefined;
  const gate = new WorkerGate({
    config,
    logger,
    eventUrl: () => {
      if (!eventUrl) throw new Error('the worker gate dispatched before its server was listening');
      return eventUrl;
    },
  });
  if (!config.worker_wake_gate_bearer_token) throw new Error('worker_wake_gate_bearer_token is required for the worker_gate role');
  return {
    role: { gate, token: config.worker_wake_gate_bearer_token },
    bindPort: (port) => {
      eventUrl = agentEventUrl(config.listen_host, port);
    },
  };
}

export interface RunningWorkerGate {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** The worker gate alone (roles ["worker_gate"]): no database and no Temporal; its records live under state_dir. */
export async function startWorkerGateOnly(config: Config, logger: Logger): Promise<RunningWorkerGate> {
  const { role, bindPort } = createWorkerGateRole(config, logger);
  let app: FastifyInstance | undefined;
  const stop = async () => {
    await app?.close();
    await role.gate.stop();
  };
  try {
    const trace = operationalTraceFrom(config);
    app = await createWorkerGateServer(config.control_api_bearer_token, role, logger, {
      allowedHosts: config.allowed_hosts,
      limits: httpLimitsFrom(config),
      checkAnswers: checkAnswersFromEnvironment(),
      ...(trace ? { operationalTrace: trace } : {}),
      ...routeObservabilityFrom(config),
    });
    await app.listen({ host: config.listen_host, port: config.listen_port });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.listen_port;
    bindPort(port);
    await role.gate.start();
    return { url: `http://${browsableHost(config.listen_host)}:${port}`, port, stop };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}
